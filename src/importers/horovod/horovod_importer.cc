#include "importers/horovod/horovod_importer.h"

#include <set>
#include <string>

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
  TP_RETURN_IF_ERROR(RefuseFilesGivenTwice(options.timelines));
  HorovodImportResult result;
  // A timeline is one job's (rank 0 writes it, its pids are tensors): each file is a node of
  // its own, also when two are named alike.
  std::set<std::string> taken;
  for (const std::string& path : options.timelines) ProgressAddFile(options.progress, path);
  for (const std::string& path : options.timelines) {
    model::NodeInfo node;
    const std::string wanted = store::SanitizeNodeName(FileStem(path));
    node.node = UnusedName(wanted, taken);
    taken.insert(node.node);
    if (node.node != wanted) {
      result.warnings.push_back(path + ": node " + wanted +
                                " was taken by another timeline: stored as node " + node.node);
    }
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
    if (options.base_time_ns && s->file_base_ns && *s->file_base_ns != *options.base_time_ns) {
      result.warnings.push_back(path +
                                ": --base-time-us not used: the timeline gives its own "
                                "start (start_time_since_epoch_in_micros " +
                                std::to_string(*s->file_base_ns / 1000) + ")");
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
