#include "faiss_format.hpp"

#include <limits>
#include <string>
#include <vector>

#include "../errors.hpp"
#include "checked.hpp"
#include "native_format.hpp"
#include "payload_checks.hpp"

namespace ivfgpu::io {

using namespace faiss;

namespace {

constexpr uint32_t kFlatL2 = fourcc("IxF2"), kFlatIP = fourcc("IxFI"), kArrayLists = fourcc("ilar"),
                   kNullLists = fourcc("il00"), kOnDiskLists = fourcc("ilod"), kFull = fourcc("full"),
                   kSparse = fourcc("sprs");

constexpr uint64_t kMaxUntrainedNlist = uint64_t{1} << 20;

[[noreturn]] void corrupt(const std::string& what) { fail(Errc::CorruptData, "FAISS file: " + what); }
[[noreturn]] void unsupported(const std::string& what) { fail(Errc::Unsupported, "FAISS file: " + what); }

const char* metric_name(int32_t m) {
  switch (m) {
    case 2: return "L1";
    case 3: return "Linf";
    case 4: return "Lp";
    case 20: return "Canberra";
    case 21: return "BrayCurtis";
    case 22: return "JensenShannon";
    case 23: return "Jaccard";
    case 24: return "NaNEuclidean";
    case 25: return "ABS_INNER_PRODUCT";
    case 26: return "GOWER";
    default: return nullptr;
  }
}

// faiss::read_index_header: d (int32), ntotal, two dummies, is_trained (1 byte), metric
// (int32), and metric_arg (float) for metrics other than inner product and L2.
struct IndexHeader {
  int64_t d = 0;
  int64_t ntotal = 0;
  bool trained = false;
  int32_t metric = 0;
};

IndexHeader read_index_header(ByteSource& in, const char* who) {
  const std::string w(who);
  IndexHeader hd;
  hd.d = in.read_pod<int32_t>("FAISS index header");
  if (hd.d < 1 || hd.d > native::kMaxDim) corrupt(w + " dimension " + std::to_string(hd.d) + " outside [1, 16777216]");
  hd.ntotal = in.read_pod<int64_t>("FAISS index header");
  if (hd.ntotal < 0) corrupt(w + " ntotal " + std::to_string(hd.ntotal) + " is negative");
  in.skip(16, "FAISS index header");  // the two dummy fields
  const uint8_t trained = in.read_pod<uint8_t>("FAISS index header");
  if (trained > 1) corrupt(w + " is_trained byte is " + std::to_string(trained) + ", not 0 or 1");
  hd.trained = trained == 1;
  hd.metric = in.read_pod<int32_t>("FAISS index header");
  if (hd.metric != kMetricL2 && hd.metric != kMetricInnerProduct) {
    const char* name = metric_name(hd.metric);
    if (name == nullptr) corrupt(w + " metric type " + std::to_string(hd.metric) + " is not a FAISS metric");
    in.skip(4, "FAISS metric_arg");
    unsupported(w + " uses metric " + name + " (" + std::to_string(hd.metric) +
                "); only L2 and inner product are supported");
  }
  return hd;
}

void write_index_header(ByteSink& out, int64_t d, int64_t ntotal, bool trained, int32_t metric) {
  out.put(static_cast<int32_t>(d));
  out.put(ntotal);
  out.put(kDummy);
  out.put(kDummy);
  out.put(static_cast<uint8_t>(trained ? 1 : 0));
  out.put(metric);
}

uint64_t read_size(ByteSource& in, const char* what) { return in.read_pod<uint64_t>(what); }

}  // namespace

bool looks_like_faiss(const unsigned char* first4) {
  uint32_t h = 0;
  for (int i = 0; i < 4; ++i) h |= uint32_t(first4[i]) << (8 * i);
  return first4[0] == 'I' && fourcc_printable(h);
}

IndexImage read_faiss(ByteSource& in) {
  const uint32_t h = in.read_pod<uint32_t>("FAISS fourcc");
  if (h != kIvfFlat) {
    if (fourcc_printable(h))
      unsupported("index type " + fourcc_text(h) + " is not supported; only IndexIVFFlat ('IwFl') is read");
    corrupt("unknown fourcc " + fourcc_text(h));
  }
  const IndexHeader ih = read_index_header(in, "IndexIVFFlat");
  const uint64_t nlist = read_size(in, "FAISS nlist");
  if (nlist < 1 || nlist > uint64_t(native::kMaxNlist)) corrupt("nlist " + std::to_string(nlist) + " outside [1, 2^30]");
  const uint64_t nprobe = read_size(in, "FAISS nprobe");
  if (nprobe < 1 || nprobe > uint64_t(std::numeric_limits<int64_t>::max()))
    corrupt("nprobe " + std::to_string(nprobe) + " is not in [1, 2^63)");

  // The nested quantizer: a flat index whose vectors are the centroids.
  const uint32_t qh = in.read_pod<uint32_t>("FAISS quantizer fourcc");
  if (qh != kFlatL2 && qh != kFlatIP) {
    if (fourcc_printable(qh))
      unsupported("quantizer " + fourcc_text(qh) + " is not supported; only IndexFlatL2 ('IxF2') and IndexFlatIP ('IxFI')");
    corrupt("unknown quantizer fourcc " + fourcc_text(qh));
  }
  const IndexHeader qd = read_index_header(in, "quantizer");
  if (qd.d != ih.d) corrupt("quantizer dimension " + std::to_string(qd.d) + " != index dimension " + std::to_string(ih.d));
  if (qd.metric != ih.metric) corrupt("quantizer metric differs from the index metric");
  if ((qh == kFlatL2) != (qd.metric == kMetricL2)) corrupt("quantizer fourcc " + fourcc_text(qh) + " contradicts its metric");
  if (ih.trained ? uint64_t(qd.ntotal) != nlist : qd.ntotal != 0)
    corrupt("quantizer holds " + std::to_string(qd.ntotal) + " centroids; a" + (ih.trained ? " trained" : "n untrained") +
            " index with nlist " + std::to_string(nlist) + " needs " + (ih.trained ? std::to_string(nlist) : "0"));
  if (!ih.trained && ih.ntotal != 0) corrupt("an untrained index holds " + std::to_string(ih.ntotal) + " vectors");
  // A trained file holds nlist x d centroid floats, so the per-list arrays we allocate stay
  // proportional to its size; an untrained one holds none, and a tiny file could otherwise make
  // us allocate 16 bytes for each of 2^30 lists.
  if (!ih.trained && nlist > kMaxUntrainedNlist)
    unsupported("an untrained index with nlist " + std::to_string(nlist) + " (more than " +
                std::to_string(kMaxUntrainedNlist) + ") is refused: it would allocate per-list state for an empty file");
  const uint64_t ncodes = read_size(in, "FAISS quantizer codes");  // in floats
  const uint64_t want = checked_mul(uint64_t(qd.ntotal), uint64_t(qd.d), "quantizer codes");
  if (ncodes != want)
    corrupt("quantizer stores " + std::to_string(ncodes) + " floats; ntotal x d is " + std::to_string(want));

  IndexImage image;
  HostModel& m = image.model;
  m.dim = ih.d;
  m.nlist = static_cast<int64_t>(nlist);
  m.metric = ih.metric == kMetricL2 ? Metric::L2 : Metric::InnerProduct;
  m.trained = ih.trained;
  const uint64_t centroid_bytes = checked_mul(ncodes, sizeof(float), "quantizer codes");
  in.expect(centroid_bytes, "FAISS quantizer codes");
  m.centroids.resize(to_size(ncodes, "quantizer codes"));
  in.read(m.centroids.data(), centroid_bytes, "FAISS quantizer codes");
  check_finite(m.centroids.data(), m.centroids.size(), 0, m.dim, "FAISS centroids");

  // The direct map (id -> position), which we do not keep: its lengths are checked and skipped.
  const uint8_t dm_type = in.read_pod<uint8_t>("FAISS direct map type");
  if (dm_type > 2) corrupt("direct map type " + std::to_string(dm_type) + " is not 0, 1 or 2");
  const uint64_t dm_array = read_size(in, "FAISS direct map array");
  if (dm_type == 0 ? dm_array != 0 : dm_type == 1 ? dm_array != uint64_t(ih.ntotal) : dm_array != 0)
    corrupt("direct map of type " + std::to_string(dm_type) + " has an array of " + std::to_string(dm_array) + " entries");
  in.skip(checked_mul(dm_array, sizeof(int64_t), "direct map"), "FAISS direct map array");
  if (dm_type == 2) {
    const uint64_t pairs = read_size(in, "FAISS direct map hashtable");
    if (pairs > uint64_t(ih.ntotal))
      corrupt("direct map hashtable has " + std::to_string(pairs) + " entries for " + std::to_string(ih.ntotal) + " vectors");
    in.skip(checked_mul(pairs, 2 * sizeof(int64_t), "direct map"), "FAISS direct map hashtable");
  }

  // The inverted lists.
  const uint32_t ilh = in.read_pod<uint32_t>("FAISS inverted lists fourcc");
  if (ilh != kArrayLists) {
    if (ilh == kOnDiskLists) unsupported("on-disk inverted lists ('ilod') are not supported; only array lists ('ilar')");
    if (ilh == kNullLists) unsupported("the index has no inverted lists ('il00')");
    if (fourcc_printable(ilh)) unsupported("inverted lists " + fourcc_text(ilh) + " are not supported; only array lists ('ilar')");
    corrupt("unknown inverted lists fourcc " + fourcc_text(ilh));
  }
  const uint64_t il_nlist = read_size(in, "FAISS inverted lists nlist");
  if (il_nlist != nlist) corrupt("inverted lists nlist " + std::to_string(il_nlist) + " != index nlist " + std::to_string(nlist));
  const uint64_t code_size = read_size(in, "FAISS inverted lists code size");
  if (code_size != uint64_t(ih.d) * sizeof(float))
    corrupt("code size " + std::to_string(code_size) + " != 4 x dimension " + std::to_string(ih.d));
  const uint32_t list_type = in.read_pod<uint32_t>("FAISS inverted lists type");
  const uint64_t nsizes = read_size(in, "FAISS list sizes");
  in.expect(checked_mul(nsizes, sizeof(uint64_t), "list sizes"), "FAISS list sizes");
  std::vector<uint64_t> sizes(to_size(nsizes, "list sizes"));
  in.read(sizes.data(), nsizes * sizeof(uint64_t), "FAISS list sizes");
  std::vector<uint64_t> list_size(nlist, 0);
  if (list_type == kFull) {
    if (nsizes != nlist) corrupt("'full' list sizes: " + std::to_string(nsizes) + " entries for nlist " + std::to_string(nlist));
    list_size = sizes;
  } else if (list_type == kSparse) {
    if (nsizes % 2 != 0) corrupt("'sprs' list sizes: odd number of entries");
    uint64_t next = 0;  // list numbers strictly increase
    for (uint64_t i = 0; i < nsizes; i += 2) {
      const uint64_t l = sizes[i];
      if (l >= nlist || l < next) corrupt("'sprs' list number " + std::to_string(l) + " out of order or >= nlist");
      list_size[l] = sizes[i + 1];
      next = l + 1;
    }
  } else {
    corrupt("inverted lists type " + fourcc_text(list_type) + " is neither 'full' nor 'sprs'");
  }
  uint64_t sum = 0;
  for (uint64_t s : list_size) sum = checked_add(sum, s, "sum of list sizes");
  if (sum != uint64_t(ih.ntotal))
    corrupt("list sizes add up to " + std::to_string(sum) + ", ntotal is " + std::to_string(ih.ntotal));
  const uint64_t n = sum;
  // Every list's codes and ids must be present before anything is allocated.
  const uint64_t payload = checked_mul(n, checked_add(code_size, sizeof(int64_t), "list entry"), "list payload");
  in.expect(payload, "FAISS inverted list data");
  if (in.remaining() != payload)
    corrupt(std::to_string(in.remaining() - payload) + " bytes follow the last inverted list");

  m.list_offsets.assign(nlist + 1, 0);
  for (uint64_t l = 0; l < nlist; ++l) m.list_offsets[l + 1] = m.list_offsets[l] + static_cast<int64_t>(list_size[l]);
  m.vectors.resize(to_size(checked_mul(n, uint64_t(ih.d), "vectors"), "vectors"));
  m.ids.resize(to_size(n, "ids"));
  const auto d = static_cast<std::size_t>(ih.d);
  for (uint64_t l = 0; l < nlist; ++l) {
    const std::size_t begin = static_cast<std::size_t>(m.list_offsets[l]), count = static_cast<std::size_t>(list_size[l]);
    if (count == 0) continue;
    float* codes = m.vectors.data() + begin * d;
    int64_t* ids = m.ids.data() + begin;
    in.read(codes, uint64_t(count) * code_size, "FAISS list codes");
    in.read(ids, uint64_t(count) * sizeof(int64_t), "FAISS list ids");
    check_finite(codes, count * d, 0, ih.d, ("FAISS list " + std::to_string(l)).c_str());
    check_ids(ids, count, begin, "FAISS ids");
  }

  image.params.nlist = m.nlist;
  image.params.metric = m.metric;
  image.params.nprobe = static_cast<int64_t>(nprobe);
  if (m.trained) m.compute_centroid_norms();
  m.validate();
  return image;
}

void write_faiss(const HostModel& m, const BuildParams& params, ByteSink& out) {
  if (m.type != ElementType::F32)
    fail(Errc::Unsupported, std::string("FAISS IndexIVFFlat stores f32 vectors; this index stores ") + element_name(m.type) +
                                " (save it with ivf_save, or load it with IVF_PARAM_STORAGE_TYPE = f32 and export that)");
  if (m.metric == Metric::Cosine)
    fail(Errc::Unsupported, "FAISS has no cosine IndexIVFFlat: only L2 and inner-product indexes can be written as FAISS files");
  const int32_t metric = m.metric == Metric::L2 ? kMetricL2 : kMetricInnerProduct;
  out.put(kIvfFlat);
  write_index_header(out, m.dim, m.ntotal(), m.trained, metric);
  out.put(static_cast<uint64_t>(m.nlist));
  out.put(static_cast<uint64_t>(params.nprobe));
  // Quantizer: an IndexFlat is always "trained"; it holds the centroids once the IVF is.
  out.put(metric == kMetricL2 ? kFlatL2 : kFlatIP);
  const int64_t qntotal = m.trained ? m.nlist : 0;
  write_index_header(out, m.dim, qntotal, true, metric);
  out.put(static_cast<uint64_t>(qntotal * m.dim));
  if (m.trained) out.write(m.centroids.data(), m.centroids.size() * sizeof(float));
  // Direct map: none.
  out.put(static_cast<uint8_t>(0));
  out.put(static_cast<uint64_t>(0));
  // Array inverted lists, "full" when more than half the lists are non-empty (as FAISS does).
  out.put(kArrayLists);
  out.put(static_cast<uint64_t>(m.nlist));
  out.put(static_cast<uint64_t>(m.dim) * sizeof(float));
  uint64_t non_empty = 0;
  for (int64_t l = 0; l < m.nlist; ++l) non_empty += m.list_size(l) > 0;
  std::vector<uint64_t> sizes;
  if (non_empty > static_cast<uint64_t>(m.nlist) / 2) {
    out.put(kFull);
    for (int64_t l = 0; l < m.nlist; ++l) sizes.push_back(static_cast<uint64_t>(m.list_size(l)));
  } else {
    out.put(kSparse);
    for (int64_t l = 0; l < m.nlist; ++l)
      if (m.list_size(l) > 0) {
        sizes.push_back(static_cast<uint64_t>(l));
        sizes.push_back(static_cast<uint64_t>(m.list_size(l)));
      }
  }
  out.put(static_cast<uint64_t>(sizes.size()));
  out.write(sizes.data(), sizes.size() * sizeof(uint64_t));
  for (int64_t l = 0; l < m.nlist; ++l) {
    const int64_t begin = m.list_offsets[l], count = m.list_size(l);
    if (count == 0) continue;
    out.write(m.vectors.data() + begin * m.dim, static_cast<std::size_t>(count * m.dim) * sizeof(float));
    out.write(m.ids.data() + begin, static_cast<std::size_t>(count) * sizeof(int64_t));
  }
}

}  // namespace ivfgpu::io
