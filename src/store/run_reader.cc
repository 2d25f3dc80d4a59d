#include "store/run_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <tuple>

#include "base/files.h"
#include "base/parallel.h"
#include "base/platform.h"
#include "model/data_quality.h"
#include "store/run_directory.h"
#include "store/schema.h"

namespace trainprof::store {

StatusOr<std::unique_ptr<RunReader>> RunReader::Open(const std::string& run_dir) {
  if (!IsDirectory(run_dir)) return NotFound(run_dir + ": no such run directory");
  if (!IsRunDirectory(run_dir)) {
    return NotFound(run_dir + ": not a trainprof run (no run.json and no nodes/ directory)");
  }
  std::unique_ptr<RunReader> reader(new RunReader(run_dir));
  TP_RETURN_IF_ERROR(reader->Refresh());
  return reader;
}

Status RunReader::Refresh() {
  // run.json is replaced atomically when it changes: parse it again only then (a live reader
  // refreshes every few seconds for hours).
  struct stat st {};
  std::array<int64_t, 4> stamp{-1, -1, -1, -1};
  if (::stat(RunJsonPath(dir_).c_str(), &st) == 0) {
    const timespec mtime = platform::ModificationTime(st);
    stamp = {static_cast<int64_t>(st.st_ino), static_cast<int64_t>(st.st_size),
             static_cast<int64_t>(mtime.tv_sec), static_cast<int64_t>(mtime.tv_nsec)};
  }
  const bool metadata_unchanged = stamp[0] >= 0 && stamp == metadata_stamp_;
  auto metadata =
      metadata_unchanged ? StatusOr<model::RunMetadata>(metadata_) : ReadRunMetadata(dir_);
  if (metadata.ok()) {
    metadata_ = std::move(metadata).value();
    metadata_stamp_ = stamp;
  } else if (metadata.status().code() == StatusCode::kFailedPrecondition) {
    return metadata.status();  // a newer format: refuse rather than misread
  } else {
    std::string problem = metadata.status().message();
    if (std::find(problems_.begin(), problems_.end(), problem) == problems_.end()) {
      problems_.push_back(problem);
    }
  }
  TP_ASSIGN_OR_RETURN(auto store_files, ListStoreFiles(dir_));
  for (const std::string& path : store_files) {
    if (nodes_.count(path)) continue;
    auto node = NodeStoreReader::Open(path);
    if (!node.ok()) {
      if (node.status().code() == StatusCode::kFailedPrecondition) return node.status();
      if (std::find(failed_nodes_.begin(), failed_nodes_.end(), path) == failed_nodes_.end()) {
        failed_nodes_.push_back(path);
        problems_.push_back(node.status().message());
      }
      continue;
    }
    if (!(*node)->warning().empty()) problems_.push_back((*node)->warning());
    failed_nodes_.erase(std::remove(failed_nodes_.begin(), failed_nodes_.end(), path),
                        failed_nodes_.end());
    nodes_[path] = std::move(node).value();
  }
  if (nodes_.empty() && !failed_nodes_.empty()) {
    return DataLoss(dir_ + ": no node store could be read: " + problems_.back());
  }
  return OkStatus();
}

std::vector<std::string> RunReader::nodes() const {
  std::vector<std::string> out;
  for (const model::NodeInfo* info : node_infos()) out.push_back(info->node);
  return out;
}

std::vector<const model::NodeInfo*> RunReader::node_infos() const {
  // One entry per node name; the facts of a node's main store (store.sqlite) win over those
  // its processes' stores carry.
  std::vector<const model::NodeInfo*> out;
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& [path, node] : nodes_) {
      bool main_store =
          path.size() >= 12 && path.compare(path.size() - 12, 12, "store.sqlite") == 0;
      if ((pass == 0) != main_store) continue;
      bool seen = false;
      for (const auto* info : out) seen |= info->node == node->node();
      if (!seen) out.push_back(&node->info());
    }
  }
  std::sort(out.begin(), out.end(),
            [](const model::NodeInfo* a, const model::NodeInfo* b) { return a->node < b->node; });
  return out;
}

void RunReader::NoteProblems(const ReadProblems& p) {
  corrupt_chunks_seen_ += p.corrupt_chunks;
  for (const auto& m : p.messages) {
    if (problems_.size() < 100) problems_.push_back(m);
  }
}

namespace {

// Codes in `to` of every value of `from`, in `from`'s order: coding them in that order adds the
// new ones to `to` in the order a sequential read of the same store would have met them.
std::vector<int32_t> Recode(const Dictionary& from, Dictionary* to) {
  std::vector<int32_t> codes;
  codes.reserve(from.values().size());
  for (const std::string& v : from.values()) codes.push_back(to->Code(v));
  return codes;
}

void AppendCodes(std::vector<int32_t>* to, const std::vector<int32_t>& from,
                 const std::vector<int32_t>& codes) {
  to->reserve(to->size() + from.size());
  for (int32_t c : from) to->push_back(codes[static_cast<size_t>(c)]);
}

template <typename T>
void AppendColumn(std::vector<T>* to, std::vector<T>&& from) {
  if (to->empty()) {
    *to = std::move(from);
    return;
  }
  to->insert(to->end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
}

// Appends `part` (one store's rows) to `out` as if that store had been read into `out`.
void Append(MetricTable&& part, MetricTable* out) {
  const auto nodes = Recode(part.nodes, &out->nodes);
  const auto metrics = Recode(part.metrics, &out->metrics);
  const auto devices = Recode(part.devices, &out->devices);
  AppendCodes(&out->node, part.node, nodes);
  AppendCodes(&out->metric, part.metric, metrics);
  AppendCodes(&out->device, part.device, devices);
  AppendColumn(&out->timestamp_ns, std::move(part.timestamp_ns));
  AppendColumn(&out->value, std::move(part.value));
}

void Append(EventTable&& part, EventTable* out) {
  const auto nodes = Recode(part.nodes, &out->nodes);
  const auto names = Recode(part.names, &out->names);
  const auto categories = Recode(part.categories, &out->categories);
  const auto modes = Recode(part.modes, &out->modes);
  AppendCodes(&out->node, part.node, nodes);
  AppendCodes(&out->name, part.name, names);
  AppendCodes(&out->category, part.category, categories);
  AppendCodes(&out->mode, part.mode, modes);
  AppendColumn(&out->kind, std::move(part.kind));
  AppendColumn(&out->rank, std::move(part.rank));
  AppendColumn(&out->pid, std::move(part.pid));
  AppendColumn(&out->tid, std::move(part.tid));
  AppendColumn(&out->step, std::move(part.step));
  AppendColumn(&out->start_ns, std::move(part.start_ns));
  AppendColumn(&out->duration_ns, std::move(part.duration_ns));
  AppendColumn(&out->args, std::move(part.args));
}

void Merge(const ReadProblems& part, ReadProblems* out) {
  out->corrupt_chunks += part.corrupt_chunks;
  for (const std::string& m : part.messages) {
    if (out->messages.size() < 10) out->messages.push_back(m);
  }
}

}  // namespace

std::vector<NodeStoreReader*> RunReader::SelectedStores(const std::vector<std::string>& nodes) {
  std::vector<NodeStoreReader*> out;
  for (auto& [path, node] : nodes_) {
    if (nodes.empty() || std::find(nodes.begin(), nodes.end(), node->node()) != nodes.end()) {
      out.push_back(node.get());
    }
  }
  return out;
}

template <typename Table, typename ReadFn>
std::vector<Table> RunReader::ReadEachStore(const std::vector<NodeStoreReader*>& stores,
                                            ReadProblems* problems, const ReadFn& read) {
  // One store per unit: a store (its SQLite connection, its string cache) is only ever used by
  // one thread at a time. Problems are merged in store order, as a sequential read adds them.
  std::vector<Table> parts(stores.size());
  std::vector<ReadProblems> part_problems(stores.size());
  std::vector<Status> status(stores.size());
  ParallelFor(stores.size(),
              [&](size_t i) { status[i] = read(*stores[i], &parts[i], &part_problems[i]); });
  for (size_t i = 0; i < stores.size(); ++i) {
    Merge(part_problems[i], problems);
    if (!status[i].ok()) problems->Add(status[i].message());
  }
  return parts;
}

StatusOr<MetricTable> RunReader::SystemMetrics(const MetricQuery& query) {
  MetricTable out;
  ReadProblems problems;
  const std::vector<NodeStoreReader*> stores = SelectedStores(query.nodes);
  if (stores.size() <= 1) {
    for (NodeStoreReader* node : stores) {
      Status s = node->ReadMetrics(query, &out, &problems);
      if (!s.ok()) problems.Add(s.message());
    }
  } else {
    // Stores are read in parallel, each into its own table, then appended in store order: the
    // same rows, codes and order as reading them one after the other.
    auto parts = ReadEachStore<MetricTable>(
        stores, &problems, [&](NodeStoreReader& node, MetricTable* part, ReadProblems* p) {
          return node.ReadMetrics(query, part, p);
        });
    for (MetricTable& part : parts) Append(std::move(part), &out);
  }
  NoteProblems(problems);
  return out;
}

namespace {

template <typename T>
void Permute(std::vector<T>& column, const std::vector<uint32_t>& order) {
  std::vector<T> sorted;
  sorted.reserve(column.size());
  for (uint32_t i : order) sorted.push_back(std::move(column[i]));
  column = std::move(sorted);
}

// Chunks are read in order of their first start, but a chunk may hold an event that starts
// before the next chunk's first one (a phase span written when the phase ends lands in the same
// final chunk as the last mark), so the rows are ordered once here. Already ordered tables --
// the common case -- cost one pass.
void SortByStart(EventTable* t) {
  if (std::is_sorted(t->start_ns.begin(), t->start_ns.end())) return;
  std::vector<uint32_t> order(t->size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return t->start_ns[a] < t->start_ns[b]; });
  Permute(t->node, order);
  Permute(t->name, order);
  Permute(t->category, order);
  Permute(t->mode, order);
  Permute(t->kind, order);
  Permute(t->rank, order);
  Permute(t->pid, order);
  Permute(t->tid, order);
  Permute(t->step, order);
  Permute(t->start_ns, order);
  Permute(t->duration_ns, order);
  Permute(t->args, order);
}

}  // namespace

StatusOr<EventTable> RunReader::Events(const EventQuery& query) {
  EventTable out;
  ReadProblems problems;
  const std::vector<NodeStoreReader*> stores = SelectedStores(query.nodes);
  if (stores.size() <= 1) {
    for (NodeStoreReader* node : stores) {
      Status s = node->ReadEvents(query, &out, &problems);
      if (!s.ok()) problems.Add(s.message());
    }
  } else {
    auto parts = ReadEachStore<EventTable>(
        stores, &problems, [&](NodeStoreReader& node, EventTable* part, ReadProblems* p) {
          return node.ReadEvents(query, part, p);
        });
    for (EventTable& part : parts) Append(std::move(part), &out);
  }
  NoteProblems(problems);
  SortByStart(&out);
  return out;
}

StatusOr<std::vector<StoreEvents>> RunReader::EventsByStore(const EventQuery& query) {
  ReadProblems problems;
  const std::vector<NodeStoreReader*> stores = SelectedStores(query.nodes);
  auto parts = ReadEachStore<EventTable>(
      stores, &problems, [&](NodeStoreReader& node, EventTable* part, ReadProblems* p) {
        Status s = node.ReadEvents(query, part, p);
        SortByStart(part);  // on the worker: each store's rows in the order Events() keeps them
        return s;
      });
  NoteProblems(problems);
  std::vector<StoreEvents> out(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    out[i].node = stores[i]->node();
    out[i].events = std::move(parts[i]);
  }
  return out;
}

void RunReader::ForEachStore(
    const std::function<Status(size_t, NodeStoreReader&, ReadProblems*)>& read) {
  const std::vector<NodeStoreReader*> stores = SelectedStores({});
  std::vector<ReadProblems> part_problems(stores.size());
  std::vector<Status> status(stores.size());
  ParallelFor(stores.size(), [&](size_t i) { status[i] = read(i, *stores[i], &part_problems[i]); });
  ReadProblems problems;
  for (size_t i = 0; i < stores.size(); ++i) {
    Merge(part_problems[i], &problems);
    if (!status[i].ok()) problems.Add(status[i].message());
  }
  NoteProblems(problems);
}

template <typename Table, typename ReadFn>
StatusOr<Table> RunReader::ReadSince(ChunkCursor* cursor, bool refresh, const ReadFn& read) {
  if (refresh) TP_RETURN_IF_ERROR(Refresh());
  Table out;
  ReadProblems problems;
  for (auto& [name, node] : nodes_) {
    int64_t& last = cursor->last_chunk_id[name];
    int64_t max_id = last;
    Status s = read(*node, name, &out, &problems, last, &max_id);
    if (!s.ok()) problems.Add(s.message());
    last = max_id;
  }
  NoteProblems(problems);
  return out;
}

StatusOr<MetricTable> RunReader::SystemMetricsSince(ChunkCursor* cursor, const MetricQuery& query,
                                                    bool refresh) {
  return ReadSince<MetricTable>(
      cursor, refresh,
      [&](NodeStoreReader& node, const std::string& name, MetricTable* out, ReadProblems* problems,
          int64_t after, int64_t* max_id) {
        return node.ReadMetricsSince(query, out, problems, after, max_id, &cursor->newest_ns[name]);
      });
}

StatusOr<EventTable> RunReader::EventsSince(EventCursor* cursor, const EventQuery& query,
                                            bool refresh) {
  return ReadSince<EventTable>(cursor, refresh,
                               [&](NodeStoreReader& node, const std::string&, EventTable* out,
                                   ReadProblems* problems, int64_t after, int64_t* max_id) {
                                 return node.ReadEvents(query, out, problems, after, max_id);
                               });
}

StepTable BuildSteps(const EventTable& events) { return BuildSteps(std::vector{&events}); }

StepTable BuildSteps(const std::vector<const EventTable*>& tables) {
  // Keys name nodes and modes by run-wide codes: a (node, rank, pid, mode, step) is one row
  // whichever table holds its step or its parts.
  using Key = std::tuple<int32_t, int64_t, int64_t, int32_t, int64_t>;  // node rank pid mode step
  Dictionary node_ids, mode_ids;
  struct Codes {
    std::vector<int32_t> node, mode;
    int32_t step_cat = -1;
    int32_t part_cats[4] = {-1, -1, -1, -1};
  };
  auto find_code = [](const Dictionary& d, const std::string& v) -> int32_t {
    const auto& values = d.values();
    auto it = std::find(values.begin(), values.end(), v);
    return it == values.end() ? -1 : static_cast<int32_t>(it - values.begin());
  };
  std::vector<Codes> codes(tables.size());
  // (table, row) of every step span, in the tables' order.
  std::vector<std::pair<uint32_t, uint32_t>> order;
  for (size_t t = 0; t < tables.size(); ++t) {
    const EventTable& e = *tables[t];
    Codes& c = codes[t];
    for (const std::string& n : e.nodes.values()) c.node.push_back(node_ids.Code(n));
    for (const std::string& m : e.modes.values()) c.mode.push_back(mode_ids.Code(m));
    c.step_cat = find_code(e.categories, model::kCategoryStep);
    const char* parts[4] = {model::kCategoryDataWait, model::kCategoryForward,
                            model::kCategoryBackward, model::kCategoryOptimizer};
    for (int p = 0; p < 4; ++p) c.part_cats[p] = find_code(e.categories, parts[p]);
    if (c.step_cat < 0) continue;
    for (size_t i = 0; i < e.size(); ++i) {
      if (e.category[i] == c.step_cat && e.kind[i] == 0) {
        order.push_back({static_cast<uint32_t>(t), static_cast<uint32_t>(i)});
      }
    }
  }
  auto key_of = [&](size_t t, size_t i) {
    const EventTable& e = *tables[t];
    return Key{codes[t].node[static_cast<size_t>(e.node[i])], e.rank[i], e.pid[i],
               codes[t].mode[static_cast<size_t>(e.mode[i])], e.step[i]};
  };
  // Steps first, in time order; equal starts keep the tables' order, so that tables sorted by
  // start (stably, in store order) give the rows of their merged table.
  std::stable_sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    return tables[a.first]->start_ns[a.second] < tables[b.first]->start_ns[b.second];
  });
  std::map<Key, size_t> row_of;
  StepTable out;
  for (const auto& [t, i] : order) {
    const EventTable& e = *tables[t];
    auto [it, inserted] = row_of.emplace(key_of(t, i), out.size());
    if (!inserted) continue;  // a duplicate step record: keep the first
    out.node.push_back(out.nodes.Code(e.nodes.at(e.node[i])));
    out.mode.push_back(out.modes.Code(e.modes.at(e.mode[i])));
    out.rank.push_back(e.rank[i]);
    out.pid.push_back(e.pid[i]);
    out.step.push_back(e.step[i]);
    out.start_ns.push_back(e.start_ns[i]);
    out.duration_ns.push_back(e.duration_ns[i]);
    for (auto* col : {&out.data_wait_ns, &out.forward_ns, &out.backward_ns, &out.optimizer_ns}) {
      col->push_back(model::kMissing);
    }
  }
  if (row_of.empty()) return out;
  std::vector<int64_t>* part_cols[4] = {&out.data_wait_ns, &out.forward_ns, &out.backward_ns,
                                        &out.optimizer_ns};
  for (size_t t = 0; t < tables.size(); ++t) {
    const EventTable& e = *tables[t];
    const Codes& c = codes[t];
    for (size_t i = 0; i < e.size(); ++i) {
      for (int p = 0; p < 4; ++p) {
        if (c.part_cats[p] < 0 || e.category[i] != c.part_cats[p]) continue;
        auto it = row_of.find(key_of(t, i));
        if (it == row_of.end()) continue;
        int64_t& cell = (*part_cols[p])[it->second];
        cell = (cell == model::kMissing ? 0 : cell) + e.duration_ns[i];
      }
    }
  }
  return out;
}

StepTable BuildSteps(const std::vector<StoreEvents>& stores) {
  std::vector<const EventTable*> tables(stores.size());
  for (size_t i = 0; i < stores.size(); ++i) tables[i] = &stores[i].events;
  return BuildSteps(tables);
}

StatusOr<StepTable> RunReader::Steps() {
  std::map<std::string, std::pair<int64_t, int64_t>> generation;
  bool known = true;
  for (auto& [path, node] : nodes_) {
    auto g = node->EventGeneration();
    if (!g.ok()) {
      known = false;  // read the events and let that report the problem
      break;
    }
    generation[path] = *g;
  }
  if (known && steps_cache_ && generation == steps_generation_) return *steps_cache_;
  EventQuery query;
  query.categories = {model::kCategoryStep, model::kCategoryDataWait, model::kCategoryForward,
                      model::kCategoryBackward, model::kCategoryOptimizer};
  TP_ASSIGN_OR_RETURN(EventTable events, Events(query));
  StepTable steps = BuildSteps(events);
  if (known) {
    steps_cache_ = steps;
    steps_generation_ = std::move(generation);
  } else {
    steps_cache_.reset();
  }
  return steps;
}

StatusOr<std::vector<model::Finding>> RunReader::Findings() {
  std::vector<model::Finding> out;
  for (auto& [name, node] : nodes_) {
    TP_ASSIGN_OR_RETURN(auto findings, node->Findings());
    out.insert(out.end(), findings.begin(), findings.end());
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  return out;
}

StatusOr<std::vector<NodeSeries>> RunReader::ListSeries() {
  std::vector<NodeSeries> out;
  for (auto& [name, node] : nodes_) {
    TP_ASSIGN_OR_RETURN(auto series, node->ListSeries());
    for (auto& s : series) out.push_back({node->node(), std::move(s)});
  }
  return out;
}

StatusOr<std::map<std::string, int64_t>> RunReader::Counters() {
  std::map<std::string, int64_t> out;
  for (auto& [name, node] : nodes_) {
    TP_ASSIGN_OR_RETURN(auto counters, node->Counters());
    for (const auto& [k, v] : counters) out[k] += v;
  }
  if (corrupt_chunks_seen_ > 0) out[model::dq::kCorruptChunks] += corrupt_chunks_seen_;
  return out;
}

StatusOr<std::vector<std::pair<std::string, Annotation>>> RunReader::Annotations() {
  std::vector<std::pair<std::string, Annotation>> out;
  for (auto& [name, node] : nodes_) {
    TP_ASSIGN_OR_RETURN(auto annotations, node->Annotations());
    for (auto& a : annotations) out.emplace_back(node->node(), std::move(a));
  }
  return out;
}

StatusOr<std::map<std::string, std::map<std::string, std::string>>> RunReader::NodeMeta() {
  std::map<std::string, std::map<std::string, std::string>> out;
  for (auto& [name, node] : nodes_) {
    TP_ASSIGN_OR_RETURN(auto meta, node->Meta());
    out[node->node()].merge(meta);
  }
  return out;
}

StatusOr<std::optional<int64_t>> RunReader::LatestTimestampNs() {
  std::optional<int64_t> latest;
  for (auto& [name, node] : nodes_) {
    TP_ASSIGN_OR_RETURN(auto t, node->LatestTimestampNs());
    if (t) latest = std::max(latest.value_or(INT64_MIN), *t);
  }
  return latest;
}

StatusOr<int64_t> RunReader::EventCount() {
  int64_t n = 0;
  for (auto& [name, node] : nodes_) {
    TP_ASSIGN_OR_RETURN(int64_t c, node->EventCount());
    n += c;
  }
  return n;
}

namespace {

RunSummary Summarize(const std::string& dir) {
  RunSummary s;
  s.dir = dir;
  auto reader = RunReader::Open(dir);
  if (!reader.ok()) {
    s.error = reader.status().message();
    return s;
  }
  const model::RunMetadata& m = (*reader)->metadata();
  s.run_id = m.run_id;
  s.name = m.name;
  s.source = m.source;
  if (m.start_ns != 0) s.start_ns = m.start_ns;
  if (m.end_ns && m.start_ns != 0) s.duration_ns = *m.end_ns - m.start_ns;
  s.exit_status = m.exit_status;
  s.node_count = static_cast<int>((*reader)->nodes().size());
  if (!s.duration_ns && s.start_ns) {
    // Still running or crashed: report how far the data goes.
    auto latest = (*reader)->LatestTimestampNs();
    if (latest.ok() && latest->has_value()) s.duration_ns = **latest - *s.start_ns;
  }
  if (!(*reader)->problems().empty() && s.run_id.empty()) s.error = (*reader)->problems().front();
  return s;
}

}  // namespace

StatusOr<std::vector<RunSummary>> ListRuns(const std::string& dir) {
  if (!IsDirectory(dir)) return NotFound(dir + ": no such directory");
  if (IsRunDirectory(dir)) return std::vector<RunSummary>{Summarize(dir)};
  TP_ASSIGN_OR_RETURN(auto names, ListDirectory(dir));
  std::vector<RunSummary> out;
  for (const auto& name : names) {
    // Hidden entries are left out: an import fills `.NAME.importing.XXXXXX` (its store locked
    // until it is complete) and moves it into place only when it succeeded.
    if (name.empty() || name[0] == '.') continue;
    std::string path = JoinPath(dir, name);
    if (IsDirectory(path) && IsRunDirectory(path)) out.push_back(Summarize(path));
  }
  std::stable_sort(out.begin(), out.end(), [](const RunSummary& a, const RunSummary& b) {
    return a.start_ns.value_or(0) > b.start_ns.value_or(0);
  });
  return out;
}

}  // namespace trainprof::store
