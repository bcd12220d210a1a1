#include "core/runtime/settings.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>

#include "compressors/registry.h"
#include "core/runtime/setting_checks.h"
#include "core/runtime/setting_values.h"
#include "kernels/blas_loader.h"

extern char** environ;

namespace slimreduce {
namespace {

// Whether the folder of a path prefix ("dir/name": "dir"; "name": ".") exists.
bool folder_exists(const std::string& prefix) {
  const std::size_t slash = prefix.rfind('/');
  const std::string folder = slash == std::string::npos ? "."
                             : slash == 0               ? "/"
                                                        : prefix.substr(0, slash);
  struct stat info {};
  return stat(folder.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

constexpr std::string_view kPrefix = "SLIMREDUCE_";

// One row per setting: the only place a setting is defined.
struct SettingSpec {
  const char* name;
  const char* default_text;
  std::function<std::string()> accepted;  // a function: compressor names come from the registry
  const char* effect;
  // Parses the value into settings; throws std::invalid_argument when not accepted.
  std::function<void(const std::string&, Settings&)> apply;
  std::function<std::string(const Settings&)> show;
  // Whether every rank must hold the same value: it decides which calls are
  // compressed, how, cut or fused how, so ranks that differ send different
  // collectives (core/runtime/wire_agreement.h checks it).
  bool shapes_wire = false;
};

// "none" or a registered compressor's name.
bool names_compressor(const std::string& name) {
  return name == "none" || compressors::make_compressor(name, {}) != nullptr;
}

std::string compressor_choices() {
  std::vector<std::string> names = {"none"};
  for (const auto& name : compressors::registered_names()) names.push_back(name);
  return join(names);
}

const std::vector<std::pair<const char*, Priority>> kPriorities = {{"fifo", Priority::fifo},
                                                                   {"reverse", Priority::reverse}};
const std::vector<std::pair<const char*, Pipelining>> kPipelining = {
    {"auto", Pipelining::automatic}, {"0", Pipelining::off}, {"1", Pipelining::on}};
const std::vector<std::pair<const char*, LogLevel>> kLogLevels = {{"error", LogLevel::error},
                                                                  {"warn", LogLevel::warn},
                                                                  {"info", LogLevel::info},
                                                                  {"debug", LogLevel::debug}};
// SLIMREDUCE_AUTO_CANDIDATES: a comma-separated list of "none" and registered
// compressors, each once; never "auto" itself, never empty.
std::vector<std::string> parse_candidates(const std::string& value) {
  std::vector<std::string> names;
  std::size_t begin = 0;
  while (begin <= value.size()) {
    const std::size_t comma = std::min(value.find(',', begin), value.size());
    const std::string name = value.substr(begin, comma - begin);
    if (!names_compressor(name)) throw std::invalid_argument("empty, auto or unknown");
    if (std::find(names.begin(), names.end(), name) != names.end())
      throw std::invalid_argument("twice");
    names.push_back(name);
    begin = comma + 1;
  }
  return names;
}

std::string candidate_choices() {
  return "a comma-separated list, each once, of: " + compressor_choices() +
         " (not auto; set only with SLIMREDUCE_COMPRESSOR=auto)";
}

const std::vector<std::pair<const char*, compressors::TopkAlgorithm>> kTopkAlgorithms = {
    {"gather", compressors::TopkAlgorithm::gather},
    {"sharded", compressors::TopkAlgorithm::sharded},
    {"auto", compressors::TopkAlgorithm::automatic}};

// SLIMREDUCE_QUANT_BUCKET: values per scale, in [1, 2^24] (a scale per value
// already costs more than fp32; a larger bucket shares one scale too widely).
std::uint64_t parse_bucket(const std::string& value) {
  const std::uint64_t bucket = parse_unsigned(value);
  if (bucket < 1 || bucket > (1u << 24)) throw std::invalid_argument("out of range");
  return bucket;
}

// SLIMREDUCE_QUANT_BITS: the widths the quantizer codes.
int parse_quant_bits(const std::string& value) {
  if (value != "8" && value != "4" && value != "2") throw std::invalid_argument("width");
  return value[0] - '0';
}

const std::vector<std::pair<const char*, compressors::QuantCodes>> kQuantCodes = {
    {"width", compressors::QuantCodes::by_width},
    {"absmax", compressors::QuantCodes::absmax},
    {"minmax", compressors::QuantCodes::minmax}};

const std::vector<std::pair<const char*, compressors::QuantRounding>> kQuantRoundings = {
    {"nearest", compressors::QuantRounding::nearest},
    {"stochastic", compressors::QuantRounding::stochastic}};

const std::vector<std::pair<const char*, compressors::PowerSgdProducts>> kPowerSgdBlas = {
    {"auto", compressors::PowerSgdProducts::automatic},
    {"openblas", compressors::PowerSgdProducts::openblas},
    {"builtin", compressors::PowerSgdProducts::builtin}};

const std::vector<std::pair<const char*, Adaptive>> kAdaptive = {
    {"off", Adaptive::off}, {"accordion", Adaptive::accordion}};

const std::vector<std::pair<const char*, TopkValueFormat>> kTopkValues = {
    {"fp32", TopkValueFormat::fp32}, {"fp16", TopkValueFormat::fp16}};

std::string show_bytes(std::uint64_t bytes) { return std::to_string(bytes); }
std::function<std::string()> fixed(const char* text) {
  return [text] { return std::string(text); };
}

const std::vector<SettingSpec>& specs() {
  static const char* kByteSize = "a byte size: 65536, 64K, 64KiB, 1M, 1MiB, 4G (powers of 1024)";
  static const std::vector<SettingSpec> table = {
      {"SLIMREDUCE_COMPRESSOR", "none", [] { return compressor_choices() + ", auto"; },
       "What eligible float allreduces are compressed with; `none` passes every call through and "
       "only counts it; `auto` measures the candidates of SLIMREDUCE_AUTO_CANDIDATES on real "
       "calls and sends each size class with the fastest (MPI; NCCL: fp32 calls outside a group "
       "are measured, calls in a group or a CUDA graph take their class's choice).",
       [](const std::string& v, Settings& s) {
         if (v != "auto" && !names_compressor(v)) throw std::invalid_argument("");
         s.compressor = v;
       },
       [](const Settings& s) { return s.compressor; }, true},
      {"SLIMREDUCE_AUTO_CANDIDATES", "none,fp16,int8", candidate_choices,
       "With SLIMREDUCE_COMPRESSOR=auto: the compressors it chooses from, each with its own "
       "settings; set only with auto. A listed quantizer that keeps a residual (int8, quant, "
       "int4, int2) also has an unbiased twin (\"<name>/unbiased\": stochastic rounding, no "
       "residual), which only size classes whose residuals keep resetting probe.",
       [](const std::string& v, Settings& s) { s.auto_candidates = parse_candidates(v); },
       [](const Settings& s) { return join(s.candidates(), ","); }, true},
      {"SLIMREDUCE_TOPK_RATIO", "0.01",
       fixed("a number in (0, 1], or two as gentle,hard (the hard one smaller) with "
             "SLIMREDUCE_ADAPTIVE=accordion"),
       "Fraction of the values that top-k sends: k = ceil(ratio x n); with two, the level "
       "SLIMREDUCE_ADAPTIVE picks per call.",
       [](const std::string& v, Settings& s) {
         std::tie(s.topk_ratio, s.topk_ratio_hard) = parse_levels<double>(v, parse_ratio);
       },
       [](const Settings& s) { return show_levels(s.topk_ratio, s.topk_ratio_hard); }, true},
      {"SLIMREDUCE_TOPK_VALUES", "fp32", fixed("fp32, fp16"),
       "How top-k payload values travel; with fp16 the rounding error joins the residual.",
       [](const std::string& v, Settings& s) { s.topk_values = parse_choice(v, kTopkValues); },
       [](const Settings& s) { return show_choice(s.topk_values, kTopkValues); }, true},
      {"SLIMREDUCE_TOPK_ALGORITHM", "auto", fixed("gather, sharded, auto"),
       "How top-k payloads are aggregated: gather (every rank receives every payload), sharded "
       "(each rank owns a shard: parts sent to owners, summed, re-compressed, allgathered; flat "
       "in the rank count), or auto (sharded where it sends at most half the gathered bytes and "
       "the "
       "owners send top-k: ratios below about 1/4).",
       [](const std::string& v, Settings& s) {
         s.topk_algorithm = parse_choice(v, kTopkAlgorithms);
       },
       [](const Settings& s) { return show_choice(s.topk_algorithm, kTopkAlgorithms); }, true},
      {"SLIMREDUCE_QUANT_BITS", "8",
       fixed("8, 4, 2, or two as gentle,hard (the hard one fewer) with "
             "SLIMREDUCE_ADAPTIVE=accordion"),
       "Bits per value of SLIMREDUCE_COMPRESSOR=quant (int8, int4 and int2 are quant at 8, 4 and "
       "2 bits whatever this says): 4 and 2 bits pack two or four absmax codes per byte, with an "
       "error of up to half of max|x| / 7 or max|x| (a bucket's largest finite |x|).",
       [](const std::string& v, Settings& s) {
         std::tie(s.quant_bits, s.quant_bits_hard) = parse_levels<int>(v, parse_quant_bits);
       },
       [](const Settings& s) { return show_levels(s.quant_bits, s.quant_bits_hard); }, true},
      {"SLIMREDUCE_QUANT_BUCKET", "512", fixed("a whole number in [1, 16777216]"),
       "Values per scale for the quantizers: each value travels as bits / 8 + 4 / bucket "
       "bytes (fp8: 1 + 1 / bucket, its scale a one-byte power of two; MXFP8's blocks are 32).",
       [](const std::string& v, Settings& s) { s.quant_bucket = parse_bucket(v); },
       [](const Settings& s) { return std::to_string(s.quant_bucket); }, true},
      {"SLIMREDUCE_QUANT_CODES", "width", fixed("width, absmax, minmax"),
       "The quantizer's codes per bucket: width (each width's measured better one: minmax at 4 "
       "and 2 bits, absmax at 8 bits; docs/performance.md section 13), or at every width absmax "
       "(one fp32 scale, symmetric "
       "around 0: an error of up to half of max|x| / 126, / 7 or / 1 at 8, 4 or 2 bits) or "
       "minmax (codes over the bucket's [min, max], far better for values away from 0: at 8 bits "
       "a power-of-two step and an offset, an error of up to about (max - min) / 251, up to twice "
       "absmax's around 0, 1 + 8 / bucket bytes per value; at 4 and 2 bits the min and max as two "
       "fp32s, an error of up to (max - min) / 28 or / 4, never above absmax's bound but with no "
       "code for 0, 4 / bucket bytes per value more than absmax).",
       [](const std::string& v, Settings& s) { s.quant_codes = parse_choice(v, kQuantCodes); },
       [](const Settings& s) { return show_choice(s.quant_codes, kQuantCodes); }, true},
      {"SLIMREDUCE_QUANT_ROUNDING", "nearest", fixed("nearest, stochastic"),
       "How the quantizer rounds at every width (int8, quant, int4, int2; fp8 rounds to nearest "
       "and refuses stochastic): nearest (the nearest code, ties to even), or "
       "stochastic (up with the probability of the value's distance past the lower code: each "
       "code unbiased, so that a job can run with SLIMREDUCE_ERROR_FEEDBACK=0 where residuals "
       "cannot be kept; each value's error up to a whole step, twice nearest's; at 2 bits, "
       "with error feedback on, measured 20 to 100 times nearest's error, and no gain in a "
       "Horovod job's loss: docs/performance.md section 17). The random bits "
       "come from SLIMREDUCE_QUANT_SEED, the rank, the call's number among calls of its shape and "
       "the value's place: a rerun draws the same.",
       [](const std::string& v, Settings& s) {
         s.quant_rounding = parse_choice(v, kQuantRoundings);
       },
       [](const Settings& s) { return show_choice(s.quant_rounding, kQuantRoundings); }, true},
      {"SLIMREDUCE_QUANT_SEED", "0", fixed("a whole number >= 0"),
       "The seed of SLIMREDUCE_QUANT_ROUNDING=stochastic's random bits (the same on every rank; "
       "ranks draw apart by their rank).",
       [](const std::string& v, Settings& s) { s.quant_seed = parse_unsigned(v); },
       [](const Settings& s) { return std::to_string(s.quant_seed); }, true},
      {"SLIMREDUCE_POWERSGD_RANK", "4",
       fixed("a whole number in [1, 64], or two as gentle,hard (the hard one smaller) with "
             "SLIMREDUCE_ADAPTIVE=accordion"),
       "Rank r of PowerSGD's factors: a tensor viewed as a rows x cols matrix sends r x (rows + "
       "cols) floats in two fp32 sums; with two, the level SLIMREDUCE_ADAPTIVE picks per call.",
       [](const std::string& v, Settings& s) {
         std::tie(s.powersgd_rank, s.powersgd_rank_hard) = parse_levels<int>(v, parse_rank);
       },
       [](const Settings& s) { return show_levels(s.powersgd_rank, s.powersgd_rank_hard); }, true},
      {"SLIMREDUCE_POWERSGD_MIN_COMPRESSION", "2", fixed("a number >= 1"),
       "PowerSGD sums a tensor exactly in fp32 (no savings) unless its factors are at least this "
       "many times smaller than it.",
       [](const std::string& v, Settings& s) {
         s.powersgd_min_compression = parse_min_compression(v);
       },
       [](const Settings& s) { return std::to_string(s.powersgd_min_compression); }, true},
      {"SLIMREDUCE_POWERSGD_BLAS", "auto",
       fixed("auto, openblas (an error unless Debian's libopenblas0-serial loads), builtin"),
       "What computes PowerSGD's products P = M Q and Q = M^T P on the CPU: auto (a private copy "
       "of Debian's serial OpenBLAS where installed, else our loops), openblas, or builtin (our "
       "loops: the same bits on every CPU). On the GPU: cuBLAS, loaded privately.",
       [](const std::string& v, Settings& s) {
         s.powersgd_blas = parse_choice(v, kPowerSgdBlas);
         // Checked now, before any collective: loads the process's private copy.
         if (s.powersgd_blas == compressors::PowerSgdProducts::openblas &&
             !kernels::PrivateBlas::process())
           throw std::invalid_argument(kernels::PrivateBlas::process_failure());
       },
       [](const Settings& s) { return show_choice(s.powersgd_blas, kPowerSgdBlas); }},
      {"SLIMREDUCE_ADAPTIVE", "off", fixed("off, accordion"),
       "accordion: a compressor given two levels (SLIMREDUCE_TOPK_RATIO=0.01,0.001, "
       "SLIMREDUCE_POWERSGD_RANK=4,1, SLIMREDUCE_QUANT_BITS=8,4 for quant) sends each shape's "
       "calls at the gentle level in critical "
       "windows (the norm of the reduced result changed by more than "
       "SLIMREDUCE_ADAPTIVE_THRESHOLD since the last window at that level; the first windows) "
       "and at the hard level otherwise, alike on every rank (MPI host and device buffers; NCCL "
       "calls, fp16 and bf16 top-k ones too, whose norms count from the second call of their "
       "shape after them).",
       [](const std::string& v, Settings& s) { s.adaptive = parse_choice(v, kAdaptive); },
       [](const Settings& s) { return show_choice(s.adaptive, kAdaptive); }, true},
      {"SLIMREDUCE_ADAPTIVE_WINDOW", "10", fixed("a whole number >= 1 (set only with accordion)"),
       "Reduced calls of a shape per window of SLIMREDUCE_ADAPTIVE: each window's mean norm is "
       "compared with the last one's at its level.",
       [](const std::string& v, Settings& s) {
         s.adaptive_window = parse_unsigned(v);
         if (*s.adaptive_window == 0) throw std::invalid_argument("zero");
       },
       [](const Settings& s) { return std::to_string(s.window()); }, true},
      {"SLIMREDUCE_ADAPTIVE_THRESHOLD", "0.5", fixed("a number >= 0 (set only with accordion)"),
       "A window is critical (the next one goes gentle) when its mean norm changed by more than "
       "this fraction since the last window at its level (Accordion's 0.5).",
       [](const std::string& v, Settings& s) {
         s.adaptive_threshold = parse_real(v);
         if (*s.adaptive_threshold < 0.0) throw std::invalid_argument("negative");
       },
       [](const Settings& s) { return show_real(s.threshold()); }, true},
      {"SLIMREDUCE_ERROR_FEEDBACK",
       "1 for topk, powersgd and the quantizers (int8, quant, int4, int2, fp8), 0 for casts",
       fixed("0, 1"), "Carry what compression lost into the next call with the same residual key.",
       [](const std::string& v, Settings& s) { s.error_feedback = parse_flag(v); },
       [](const Settings& s) {
         return s.error_feedback ? std::to_string(*s.error_feedback) : std::string("default");
       }},
      {"SLIMREDUCE_MIN_BYTES", "65536", fixed(kByteSize),
       "Calls smaller than this pass through uncompressed.",
       [](const std::string& v, Settings& s) { s.min_bytes = parse_byte_size(v); },
       [](const Settings& s) { return show_bytes(s.min_bytes); }, true},
      {"SLIMREDUCE_WARMUP_STEPS", "0", fixed("a whole number >= 0"),
       "The first N calls of each shape (communicator, count, datatype) go uncompressed (DGC "
       "warm-up).",
       [](const std::string& v, Settings& s) { s.warmup_steps = parse_unsigned(v); },
       [](const Settings& s) { return std::to_string(s.warmup_steps); }, true},
      {"SLIMREDUCE_EF_MAX_BYTES", "4GiB", fixed(kByteSize),
       "Cap on error-feedback memory per rank (residuals, and a sharded call's owner-side "
       "residuals once made); past it, new keys are compressed without error feedback, "
       "and a tensor larger than the cap goes uncompressed (both counted).",
       [](const std::string& v, Settings& s) { s.ef_max_bytes = parse_byte_size(v); },
       [](const Settings& s) { return show_bytes(s.ef_max_bytes); }, true},
      {"SLIMREDUCE_EF_EVICT_CALLS", "10000", fixed("a whole number >= 0"),
       "A residual key unused for this many calls on its communicator (MPI or NCCL) is freed, with "
       "its compressor state (a buffer no longer used; counted as ef_evicted); 0 keeps every "
       "key until its communicator goes.",
       [](const std::string& v, Settings& s) { s.ef_evict_calls = parse_unsigned(v); },
       [](const Settings& s) { return std::to_string(s.ef_evict_calls); }, true},
      {"SLIMREDUCE_FUSION_THRESHOLD", "64MiB", fixed(kByteSize),
       "Queued MPI_Iallreduce bytes that start a flush; 0 reduces each call at once "
       "(compressed, never fused).",
       [](const std::string& v, Settings& s) { s.fusion_threshold = parse_byte_size(v); },
       [](const Settings& s) { return show_bytes(s.fusion_threshold); }, true},
      {"SLIMREDUCE_PARTITION_BYTES", "4MiB", fixed(kByteSize),
       "Calls larger than this are cut into partitions of at most this, each reduced on its "
       "own (and pipelined); also the largest fused buffer a flush makes.",
       [](const std::string& v, Settings& s) {
         s.partition_bytes = parse_byte_size(v);
         if (s.partition_bytes == 0) throw std::invalid_argument("zero");
       },
       [](const Settings& s) { return show_bytes(s.partition_bytes); }, true},
      {"SLIMREDUCE_PIPELINE", "auto", fixed("auto, 0, 1"),
       "Pipelines a partitioned call: one partition on the wire while the next is compressed "
       "and the last decoded (the same bits as 0). MPI: on a helper thread; auto: where the "
       "node has at least two CPUs per rank. NCCL, a call outside any group: on a second "
       "stream, tied by events; auto: always.",
       [](const std::string& v, Settings& s) { s.pipeline = parse_choice(v, kPipelining); },
       [](const Settings& s) { return show_choice(s.pipeline, kPipelining); }},
      {"SLIMREDUCE_PRIORITY", "fifo", fixed("fifo, reverse"),
       "Order in which a flush reduces queued calls: fifo (call order) or reverse (the last "
       "handed over first: in backprop, the first layers); the native API's priorities first.",
       [](const std::string& v, Settings& s) { s.priority = parse_choice(v, kPriorities); },
       [](const Settings& s) { return show_choice(s.priority, kPriorities); }, true},
      {"SLIMREDUCE_HIERARCHICAL", "0", fixed("0, 1, auto"),
       "Full precision inside a node, compressed across nodes (MPI host buffers; device "
       "buffers staged through the host; NCCL fp32 calls). auto: where a communicator spans "
       "nodes, the compressor (each compressing candidate of SLIMREDUCE_COMPRESSOR=auto) is "
       "also measured two-level, and flat or two-level is chosen per size class as auto "
       "chooses (not for none or powersgd, nor with SLIMREDUCE_ADAPTIVE).",
       [](const std::string& v, Settings& s) {
         s.chooses_hierarchy = v == "auto";
         s.hierarchical = s.chooses_hierarchy || parse_flag(v);
       },
       [](const Settings& s) {
         return s.chooses_hierarchy ? std::string("auto") : std::to_string(s.hierarchical);
       },
       true},
      {"SLIMREDUCE_LOCAL_SIZE", "from the node", fixed("a whole number >= 1"),
       "Ranks per node: consecutive blocks of MPI_COMM_WORLD, to emulate nodes on one "
       "machine; must divide the world size.",
       [](const std::string& v, Settings& s) {
         const std::uint64_t size = parse_unsigned(v);
         if (size < 1 || size > 1u << 20) throw std::invalid_argument("range");
         s.local_size = static_cast<int>(size);
       },
       [](const Settings& s) {
         return s.local_size ? std::to_string(*s.local_size) : std::string("from the node");
       },
       true},
      {"SLIMREDUCE_REPORT", "unset",
       fixed("stderr, or a path prefix P (each rank writes P.<rank>.json)"),
       "Where the savings report goes at MPI_Finalize.",
       [](const std::string& v, Settings& s) {
         if (v.empty()) throw std::invalid_argument("empty");
         s.report = v;
       },
       [](const Settings& s) { return s.report.empty() ? std::string("unset") : s.report; }},
      {"SLIMREDUCE_TIMELINE", "unset",
       fixed("a path prefix P in an existing folder (each rank writes P.<rank>.json)"),
       "Chrome-trace JSON of each compressed call's queue, fuse, compress, communicate and "
       "decompress spans (Perfetto, chrome://tracing).",
       [](const std::string& v, Settings& s) {
         if (v.empty() || !folder_exists(v)) throw std::invalid_argument("folder");
         s.timeline = v;
       },
       [](const Settings& s) { return s.timeline.empty() ? std::string("unset") : s.timeline; }},
      {"SLIMREDUCE_LOG_LEVEL", "warn", fixed("error, warn, info, debug"),
       "How much SlimReduce logs on stderr.",
       [](const std::string& v, Settings& s) { s.log_level = parse_choice(v, kLogLevels); },
       [](const Settings& s) { return show_choice(s.log_level, kLogLevels); }},
  };
  return table;
}

const SettingSpec* find_spec(const std::string& name) {
  for (const auto& spec : specs()) {
    if (name == spec.name) return &spec;
  }
  return nullptr;
}

std::string known_names() {
  std::vector<std::string> names;
  for (const auto& spec : specs()) names.emplace_back(spec.name);
  return join(names);
}

}  // namespace

SettingsError::SettingsError(std::string variable, std::string value, std::string accepted)
    : std::runtime_error(variable + "='" + value + "' is not accepted; expected " + accepted),
      variable_(std::move(variable)) {}

Environment read_environment() {
  Environment env;
  for (char** entry = environ; entry && *entry; ++entry) {
    const std::string_view text(*entry);
    if (!text.starts_with(kPrefix)) continue;
    const auto equals = text.find('=');
    if (equals == std::string_view::npos) continue;
    env.emplace_back(std::string(text.substr(0, equals)), std::string(text.substr(equals + 1)));
  }
  return env;
}

Settings parse_settings(const Environment& env) {
  Settings settings;
  for (const auto& [name, value] : env) {
    if (!std::string_view(name).starts_with(kPrefix)) continue;
    const SettingSpec* spec = find_spec(name);
    if (!spec) throw SettingsError(name, value, "a known setting (a typo?): " + known_names());
    try {
      spec->apply(value, settings);
    } catch (const std::invalid_argument&) {
      throw SettingsError(name, value, spec->accepted());
    } catch (const std::out_of_range&) {
      throw SettingsError(name, value, spec->accepted());
    }
  }
  check_together(settings);
  if (settings.auto_candidates && !settings.chooses_compressor()) {
    throw SettingsError("SLIMREDUCE_AUTO_CANDIDATES", join(*settings.auto_candidates, ","),
                        "unset unless SLIMREDUCE_COMPRESSOR=auto (SLIMREDUCE_COMPRESSOR=" +
                            settings.compressor + ")");
  }
  return settings;
}

std::vector<std::string> describe_settings(const Settings& settings) {
  std::vector<std::string> lines;
  for (const auto& spec : specs())
    lines.push_back(std::string(spec.name) + "=" + spec.show(settings));
  return lines;
}

std::vector<std::pair<std::string, std::string>> wire_settings(const Settings& settings) {
  std::vector<std::pair<std::string, std::string>> wire;
  for (const auto& spec : specs()) {
    if (spec.shapes_wire) wire.emplace_back(spec.name, spec.show(settings));
  }
  return wire;
}

std::string settings_markdown() {
  std::ostringstream out;
  out << "| variable | default | accepted | effect |\n| --- | --- | --- | --- |\n";
  for (const auto& spec : specs()) {
    out << "| `" << spec.name << "` | " << spec.default_text << " | " << spec.accepted() << " | "
        << spec.effect << (spec.shapes_wire ? " The same on every rank (checked)." : "") << " |\n";
  }
  return out.str();
}

}  // namespace slimreduce
