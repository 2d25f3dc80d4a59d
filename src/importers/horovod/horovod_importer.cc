#include "importers/horovod/horovod_importer.h"

#include "importers/common/chrome_trace_importer.h"
#include "importers/common/run_builder.h"
#include "store/run_directory.h"

namespace trainprof::importers::horovod {

StatusOr<HorovodImportResult> ImportHorovod(const HorovodImportOptions& options) {
  if (options.timelines.empty()) return InvalidArgument("import horovod needs a timeline file");
  std::vector<std::string> command = {"trainprof", "import", "horovod"};
  command.insert(command.end(), options.timelines.begin(), options.timelines.end());
  TP_ASSIGN_OR_RETURN(auto builder,
                      RunBuilder::Create(options.out, options.name, "import horovod", command));
  HorovodImportResult result;
  for (const std::string& path : options.timelines) ProgressAddFile(options.progress, path);
  for (const std::string& path : options.timelines) {
    model::NodeInfo node;
    node.node = store::SanitizeNodeName(FileStem(path));
    TP_ASSIGN_OR_RETURN(auto* w, builder->Node(node));
    ChromeImportOptions o;
    o.flavor = ChromeFlavor::kHorovod;
    o.base_time_ns = options.base_time_ns;
    o.progress = options.progress;
    auto s = ImportChromeTrace(path, o, w);
    if (!s.ok()) {
      (void)builder->Finish();
      return s.status();
    }
    result.spans += s->spans;
    result.instants += s->instants;
    if (s->spans + s->instants > 0) builder->NoteTime(s->start_ns, s->end_ns);
  }
  TP_RETURN_IF_ERROR(builder->Finish());
  result.nodes = builder->node_names();
  return result;
}

}  // namespace trainprof::importers::horovod
