// The kernel tester's bindings (docs/design.md §4.9): the kernel list, and one named kernel run on
// NumPy buffers, whatever the dispatch would choose. Every size is checked against both buffers
// before anything is written; a kernel this CPU cannot run, or that does not take the shape, is
// refused.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>

#include "../kernels/kernel.hpp"
#include "buffers.hpp"
#include "npupack/checked.hpp"
#include "npupack/errors.hpp"
#include "npupack/stream.hpp"

namespace py = pybind11;
using npupack::LayoutError;
using npupack::kernels::BitmaskKernelInfo;
using npupack::kernels::KernelInfo;
using npupack::kernels::Op;

namespace {

const KernelInfo& find_kernel(const std::string& name) {
  for (const KernelInfo& k : npupack::kernels::kernel_list()) {
    if (name == k.name) return k;
  }
  throw LayoutError("kernel_run: unknown kernel " + name + " (see kernel_list())");
}

// The entries of a section after the transposes.
template <class Fn>
void append_entries(py::list& out, const std::vector<npupack::kernels::Entry<Fn>>& list) {
  for (const auto& k : list) {
    py::dict d;
    d["name"] = k.name;
    d["op"] = npupack::kernels::op_name(k.op);
    d["elem"] = k.elem;
    d["tile"] = k.tile;
    d["isa"] = npupack::kernels::isa_name(k.isa);
    d["runs"] = npupack::kernels::entry_runs(k.op, k.isa);
    out.append(d);
  }
}

py::list kernel_list() {
  py::list out;
  for (const KernelInfo& k : npupack::kernels::kernel_list()) {
    py::dict d;
    d["name"] = k.name;
    d["op"] = npupack::kernels::op_name(k.op);
    d["elem"] = k.elem;
    d["tile_rows"] = k.tile_rows;
    d["tile_cols"] = k.tile_cols;
    d["isa"] = npupack::kernels::isa_name(k.isa);
    d["runs"] = npupack::kernels::isa_runs(k.isa);
    out.append(d);
  }
  append_entries(out, npupack::kernels::bitmask_list());
  append_entries(out, npupack::kernels::fp16_scan_list());
  append_entries(out, npupack::kernels::stream_copy_list());
  append_entries(out, npupack::kernels::spread_list());
  append_entries(out, npupack::kernels::pixel_shuffle_list());
  append_entries(out, npupack::kernels::yuv_split_list());
  return out;
}

// Writes `blocks` blocks of rows x row_bytes into dst with spread kernel `name`, as
// SpreadPlan::run does: row r of block x holds value r of block x (eb bytes) at byte col * eb.
void spread_run(const std::string& name, const py::array& values, py::array& dst, int64_t eb, int64_t rows,
                int64_t row_bytes, int64_t col, int64_t blocks, bool stream) {
  const char* fn = "spread_run";
  const npupack::kernels::SpreadKernelInfo* k = nullptr;
  for (const auto& e : npupack::kernels::spread_list()) {
    if (name == e.name) k = &e;
  }
  if (!k) throw LayoutError("spread_run: unknown kernel " + name + " (see kernel_list())");
  if (!npupack::kernels::entry_runs(k->op, k->isa)) {
    throw LayoutError(std::string("spread_run: this CPU lacks ") + npupack::kernels::isa_name(k->isa) + " for " + name);
  }
  npupack_bindings::check_buffer(values, "values");
  npupack_bindings::check_buffer(dst, "dst");
  if (eb < 1 || rows < 1 || row_bytes < 1 || col < 0 || blocks < 0) {
    throw LayoutError("spread_run: eb, rows and row_bytes must be >= 1, col and blocks >= 0");
  }
  const int64_t value_bytes = npupack::checked_mul(rows, eb, fn);
  const int64_t block_bytes = npupack::checked_mul(rows, row_bytes, fn);
  if (npupack::checked_mul(blocks, value_bytes, fn) > static_cast<int64_t>(values.nbytes()) ||
      npupack::checked_mul(blocks, block_bytes, fn) > static_cast<int64_t>(dst.nbytes())) {
    throw LayoutError("spread_run: values or dst is smaller than the blocks");
  }
  const npupack::SpreadPlan plan(eb, rows, row_bytes, col);
  if (!plan.ok()) {
    throw LayoutError("spread_run: " + name + " does not take eb=" + std::to_string(eb) + " rows=" +
                      std::to_string(rows) + " row_bytes=" + std::to_string(row_bytes) + " col=" + std::to_string(col));
  }
  npupack::kernels::SpreadArgs a;
  a.values = static_cast<const char*>(values.data());
  a.value_bytes = value_bytes;
  a.dst = npupack_bindings::writable_bytes(dst, "dst");
  a.block_bytes = block_bytes;
  a.blocks = blocks;
  a.chunks = plan.chunks().data();
  a.nchunks = static_cast<int64_t>(plan.chunks().size());
  a.stream = stream;
  py::gil_scoped_release release;
  k->run(a);
  if (stream) npupack::stream_fence();
}

// Copies src into dst (the same size) as stream_copy does, with stream-copy kernel `name`.
void stream_copy_run(const std::string& name, const py::array& src, py::array& dst) {
  const npupack::kernels::StreamCopyKernelInfo* k = nullptr;
  for (const auto& e : npupack::kernels::stream_copy_list()) {
    if (name == e.name) k = &e;
  }
  if (!k) throw LayoutError("stream_copy_run: unknown kernel " + name + " (see kernel_list())");
  if (!npupack::kernels::entry_runs(k->op, k->isa)) {
    throw LayoutError(std::string("stream_copy_run: this CPU lacks ") + npupack::kernels::isa_name(k->isa) + " for " + name);
  }
  npupack_bindings::check_buffer(src, "src");
  npupack_bindings::check_buffer(dst, "dst");
  if (src.nbytes() != dst.nbytes()) throw LayoutError("stream_copy_run: src and dst differ in size");
  char* d = npupack_bindings::writable_bytes(dst, "dst");
  const auto* s = static_cast<const char*>(src.data());
  const auto n = static_cast<int64_t>(src.nbytes());
  if (s < d + n && d < s + n) throw LayoutError("stream_copy_run: src and dst overlap");
  py::gil_scoped_release release;
  npupack::kernels::run_stream_copy(*k, d, s, n);
  npupack::stream_fence();
}

// Runs fp16-scan kernel `name` over the halves of `bits` (a whole number of its steps): whether
// one is INF ("inf"), NaN ("nan") or either ("nonfinite").
bool fp16_scan_run(const std::string& name, const py::array& bits, const std::string& test) {
  const char* fn = "fp16_scan_run";
  const npupack::kernels::Fp16ScanKernelInfo* k = nullptr;
  for (const auto& e : npupack::kernels::fp16_scan_list()) {
    if (name == e.name) k = &e;
  }
  if (!k) throw LayoutError(std::string(fn) + ": unknown kernel " + name + " (see kernel_list())");
  if (!npupack::kernels::entry_runs(k->op, k->isa)) {
    throw LayoutError(std::string(fn) + ": this CPU lacks " + npupack::kernels::isa_name(k->isa) + " for " + name);
  }
  npupack_bindings::check_buffer(bits, "bits");
  if (bits.nbytes() % 2) throw LayoutError("fp16_scan_run: bits is not a whole number of halves");
  if (reinterpret_cast<uintptr_t>(bits.data()) % alignof(uint16_t) != 0) {
    throw LayoutError("fp16_scan_run: bits does not start on a 2-byte boundary (the kernels read halves)");
  }
  const int64_t n = static_cast<int64_t>(bits.nbytes()) / 2;
  if (k->tile && n % k->tile) {
    throw LayoutError("fp16_scan_run: " + name + " does not take " + std::to_string(n) + " halves (a multiple of " +
                      std::to_string(k->tile) + ")");
  }
  npupack::kernels::Fp16ScanArgs a;
  a.bits = static_cast<const uint16_t*>(bits.data());
  a.n = n;
  if (test == "inf") {
    a.mask = 0x7FFF, a.value = 0x7C00, a.greater = false;
  } else if (test == "nan") {
    a.mask = 0x7FFF, a.value = 0x7C00, a.greater = true;
  } else if (test == "nonfinite") {
    a.mask = 0x7C00, a.value = 0x7C00, a.greater = false;
  } else {
    throw LayoutError("fp16_scan_run: test must be 'inf', 'nan' or 'nonfinite', not '" + test + "'");
  }
  py::gil_scoped_release release;
  return k->run(a);
}

const BitmaskKernelInfo& find_bitmask(const std::string& name, Op op, const char* fn) {
  for (const BitmaskKernelInfo& k : npupack::kernels::bitmask_list()) {
    if (name != k.name) continue;
    if (k.op != op) throw LayoutError(std::string(fn) + ": " + name + " is not a " + npupack::kernels::op_name(op) + " kernel");
    if (!npupack::kernels::entry_runs(k.op, k.isa)) throw LayoutError(std::string(fn) + ": this CPU lacks " + npupack::kernels::isa_name(k.isa) + " for " + name);
    return k;
  }
  throw LayoutError(std::string(fn) + ": unknown kernel " + name + " (see kernel_list())");
}

int64_t bitmask_elements(const py::array& dense, int es, const char* fn) {
  if (es != 1 && es != 2) throw LayoutError(std::string(fn) + ": es must be 1 or 2");
  if (dense.nbytes() % es) throw LayoutError(std::string(fn) + ": the dense buffer is not a whole number of elements");
  return static_cast<int64_t>(dense.nbytes()) / es;
}

// Runs bitmask-compress kernel `name` over the dense elements, then the scalar kernel over what
// it left, as sparse_compress does. Returns (elements the named kernel moved, DATA bytes written).
py::tuple bitmask_compress_run(const std::string& name, const py::array& dense, int es, py::array& wmb,
                               py::array& data) {
  const char* fn = "bitmask_compress_run";
  const BitmaskKernelInfo& k = find_bitmask(name, Op::kBitmaskCompress, fn);
  npupack_bindings::check_buffer(dense, "dense");
  npupack_bindings::check_buffer(wmb, "wmb");
  npupack_bindings::check_buffer(data, "data");
  const int64_t n = bitmask_elements(dense, es, fn);
  if (static_cast<int64_t>(wmb.nbytes()) < (n + 7) / 8) throw LayoutError("bitmask_compress_run: wmb is shorter than (n + 7) / 8 bytes");
  npupack::kernels::BitmaskArgs a;
  a.es = es;
  a.n = n;
  a.dense = static_cast<const uint8_t*>(dense.data());
  a.wmb_out = reinterpret_cast<uint8_t*>(npupack_bindings::writable_bytes(wmb, "wmb"));
  a.data_out = reinterpret_cast<uint8_t*>(npupack_bindings::writable_bytes(data, "data"));
  a.data_bytes = static_cast<int64_t>(data.nbytes());
  int64_t moved = 0;
  {
    py::gil_scoped_release release;
    k.run(a);
    moved = a.done;
    if (k.isa != npupack::kernels::Isa::kScalar) npupack::kernels::select_bitmask(k.op, npupack::KernelPath::kScalar).run(a);
  }
  return py::make_tuple(moved, a.pos);
}

// Runs bitmask-decompress kernel `name`, then the scalar kernel over what it left, as
// sparse_decompress does (every read bounded by DATA). Returns the elements the named kernel moved.
int64_t bitmask_decompress_run(const std::string& name, const py::array& data, const py::array& wmb, int es,
                               py::array& dense) {
  const char* fn = "bitmask_decompress_run";
  const BitmaskKernelInfo& k = find_bitmask(name, Op::kBitmaskDecompress, fn);
  npupack_bindings::check_buffer(data, "data");
  npupack_bindings::check_buffer(wmb, "wmb");
  npupack_bindings::check_buffer(dense, "dense");
  const int64_t n = bitmask_elements(dense, es, fn);
  if (static_cast<int64_t>(wmb.nbytes()) < (n + 7) / 8) throw LayoutError("bitmask_decompress_run: wmb is shorter than (n + 7) / 8 bytes");
  npupack::kernels::BitmaskArgs a;
  a.es = es;
  a.n = n;
  a.data = static_cast<const uint8_t*>(data.data());
  a.data_bytes = static_cast<int64_t>(data.nbytes());
  a.wmb = static_cast<const uint8_t*>(wmb.data());
  a.dense_out = reinterpret_cast<uint8_t*>(npupack_bindings::writable_bytes(dense, "dense"));
  int64_t moved = 0;
  {
    py::gil_scoped_release release;
    k.run(a);
    moved = a.done;
    if (k.isa != npupack::kernels::Isa::kScalar) npupack::kernels::select_bitmask(k.op, npupack::KernelPath::kScalar).run(a);
  }
  return moved;
}

// Runs kernel `name` on `count` rows x cols matrices (byte strides and steps), as
// transpose_batch does for the kernel it picks. Returns 1, or for a transpose-finite kernel 1
// when every half moved was finite and 0 when one was fp16 INF or NaN.
int kernel_run(const std::string& name, const py::array& src, int64_t src_stride, py::array& dst, int64_t dst_stride,
               int64_t rows, int64_t cols, int64_t count, int64_t src_step, int64_t dst_step, bool stream) {
  const char* fn = "kernel_run";
  const KernelInfo& k = find_kernel(name);
  if (!npupack::kernels::isa_runs(k.isa)) {
    throw LayoutError(std::string("kernel_run: this CPU lacks ") + npupack::kernels::isa_name(k.isa) + " for " + name);
  }
  npupack_bindings::check_buffer(src, "src");
  npupack_bindings::check_buffer(dst, "dst");
  const int64_t eb = k.elem;
  if (rows < 1 || cols < 1 || count < 1) throw LayoutError("kernel_run: rows, cols and count must be >= 1");
  if (src_step < 0 || dst_step < 0) throw LayoutError("kernel_run: steps must be >= 0");
  if (src_stride < npupack::checked_mul(cols, eb, fn) || dst_stride < npupack::checked_mul(rows, eb, fn)) {
    throw LayoutError("kernel_run: a stride is shorter than its row or column");
  }
  using npupack_bindings::batch_extent;
  if (batch_extent(count, src_step, rows, src_stride, cols * eb, fn) > static_cast<int64_t>(src.nbytes()) ||
      batch_extent(count, dst_step, cols, dst_stride, rows * eb, fn) > static_cast<int64_t>(dst.nbytes())) {
    throw LayoutError("kernel_run: src or dst is smaller than the batch");
  }
  npupack::kernels::TransposeArgs a;
  a.src = static_cast<const char*>(src.data());
  a.src_stride = src_stride;
  a.dst = npupack_bindings::writable_bytes(dst, "dst");
  a.dst_stride = dst_stride;
  a.rows = rows;
  a.cols = cols;
  a.count = count;
  a.src_step = src_step;
  a.dst_step = dst_step;
  a.stream = stream;
  // The two streamed forms the engine hands out: back-to-back columns (transpose_stream) and
  // whole-line columns (transpose_batch's stream, common.hpp whole_lines).
  const auto at = reinterpret_cast<uintptr_t>(a.dst);
  const bool back_to_back = count == 1 && dst_stride == rows * eb && at % 16 == 0;
  const bool lines = at % 64 == 0 && dst_stride % 64 == 0 && (count == 1 || dst_step % 64 == 0);
  if (stream && !back_to_back && !lines) {
    throw LayoutError("kernel_run: stream needs one matrix, dst_stride = rows * elem and a 16-byte aligned dst, or "
                      "a 64-byte aligned dst with dst_stride and dst_step multiples of 64");
  }
  bool nonfinite = false;
  if (k.op == Op::kTransposeFinite) a.nonfinite = &nonfinite;
  if (!k.takes(a)) {
    throw LayoutError("kernel_run: " + name + " does not take rows=" + std::to_string(rows) + " cols=" +
                      std::to_string(cols) + " src_stride=" + std::to_string(src_stride) + " count=" +
                      std::to_string(count) + (stream ? " streamed" : ""));
  }
  {
    py::gil_scoped_release release;
    k.run(a);
    if (stream) npupack::stream_fence();
  }
  return nonfinite ? 0 : 1;
}

}  // namespace

void bind_kernels(py::module_& m) {
  m.def("kernel_list", &kernel_list,
        "The microkernels in dispatch order (docs/design.md §4.9), one section per signature: dicts of name, op, "
        "isa and runs (whether this CPU has the isa); the transposes add elem (bytes), tile_rows and tile_cols (0: a "
        "run-time count), the bitmask kernels elem 0 (8- and 16-bit elements) and tile (bytes per step, 0: scalar)");
  m.def("spread_run", &spread_run, py::arg("name"), py::arg("values"), py::arg("dst"), py::arg("eb"), py::arg("rows"),
        py::arg("row_bytes"), py::arg("col"), py::arg("blocks"), py::arg("stream") = false,
        "For the kernel tester: `blocks` zero-padded blocks of rows x row_bytes bytes into dst with spread kernel "
        "`name`; row r of block x holds value r of block x (eb bytes, the rows * eb bytes of block x at values + x * "
        "rows * eb) at byte col * eb. LayoutError for an unknown name, a missing isa, short buffers or a geometry "
        "the kernel does not take (blocks not whole 32-byte chunks or over 2 KiB, under 16 bytes of values)");
  m.def("stream_copy_run", &stream_copy_run, py::arg("name"), py::arg("src"), py::arg("dst"),
        "For the kernel tester: copies the bytes of src into dst (the same size, not overlapping) as stream_copy "
        "does with stream-copy kernel `name`: plain stores up to dst's next 16-byte boundary, the kernel's "
        "non-temporal stores, plain stores for the tail. LayoutError for an unknown name, a missing isa, sizes that "
        "differ, overlapping or read-only buffers");
  m.def("fp16_scan_run", &fp16_scan_run, py::arg("name"), py::arg("bits"), py::arg("test"),
        "For the kernel tester: fp16-scan kernel `name` over the binary16 bit patterns of `bits` (its size a "
        "multiple of 2 bytes and of the kernel's tile in halves): True when one is INF (test 'inf'), NaN ('nan') or "
        "either ('nonfinite'). LayoutError for an unknown name, a missing isa, a length the kernel does not take or "
        "another test (docs/nvdla.md §14)");
  m.def("bitmask_compress_run", &bitmask_compress_run, py::arg("name"), py::arg("dense"), py::arg("es"),
        py::arg("wmb"), py::arg("data"),
        "For the kernel tester: bitmask-compress kernel `name`, then the scalar kernel over its tail, on the dense "
        "elements of es (1 or 2) bytes: (n + 7) / 8 WMB bytes (bit i of byte i // 8 set for a non-zero element) "
        "and the non-zero elements into data (its size is the capacity; bytes past those kept may change). "
        "Returns (elements the named kernel moved, DATA bytes written). LayoutError for an unknown name, another "
        "op, a missing isa, short buffers or too little DATA room (docs/nvdla.md §11)");
  m.def("bitmask_decompress_run", &bitmask_decompress_run, py::arg("name"), py::arg("data"), py::arg("wmb"),
        py::arg("es"), py::arg("dense"),
        "For the kernel tester: bitmask-decompress kernel `name`, then the scalar kernel over its tail: the dense "
        "elements (es bytes each) from the WMB bits and DATA; a set bit past DATA's end gives zeros. Returns the "
        "elements the named kernel moved. LayoutError as bitmask_compress_run (docs/nvdla.md §11)");
  m.def("kernel_run", &kernel_run, py::arg("name"), py::arg("src"), py::arg("src_stride"), py::arg("dst"),
        py::arg("dst_stride"), py::arg("rows"), py::arg("cols"), py::arg("count") = 1, py::arg("src_step") = 0,
        py::arg("dst_step") = 0, py::arg("stream") = false,
        "For the kernel tester: run kernel `name` on `count` rows x cols matrices of its element size (byte strides "
        "and steps), dst[c * dst_stride + r * elem] = src[r * src_stride + c * elem]. LayoutError when the name is "
        "unknown, the CPU lacks its isa, the buffers are too small or the kernel does not take the shape. Returns 1, "
        "or for transpose-finite kernels 0 when a half moved was fp16 INF or NaN");
}
