// The native `trainprof` executable; the Python package's console script enters the same Main.
#include "cli/cli.h"

int main(int argc, char** argv) { return trainprof::cli::Main(argc, argv); }
