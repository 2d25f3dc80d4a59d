set(TRAINPROF_WARNING_FLAGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wold-style-cast -Wcast-align -Woverloaded-virtual -Wnull-dereference
    -Wimplicit-fallthrough -Wformat=2)
if(TRAINPROF_WERROR)
  list(APPEND TRAINPROF_WARNING_FLAGS -Werror)
endif()
