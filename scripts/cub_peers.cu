// cub_peers.cu: CUB's device-wide sum, exclusive scan and select called directly, timed as kbench
// times its kernels: the strongest peers of the reduce, scan and find_repeats studies, run by
// scripts/peers.py (which builds this file with nvcc and reads its output).
//
//   nvcc -O3 -std=c++17 -arch=native -o cub_peers scripts/cub_peers.cu
//   cub_peers OP DTYPE N [N...] [--reps R] [--repeats P] [--seed S]
//
// OP DTYPE:
//   reduce i32|f32|f64  cub::DeviceReduce::Sum of n values
//   scan i32            cub::DeviceScan::ExclusiveSum of n values
//   repeats i32         what kbench's find_repeats study computes (src/algos/find_repeats.rs): every
//                       index i with a[i] == a[i+1], in order, and their count, done the CUB way:
//                       cub::DeviceSelect::If over the indices 0 .. n-2 with the predicate
//                       a[i] == a[i+1]
// R: timed calls per size (default 20); P: repeats' share of find_repeats' input (default 0.1, as
// experiments/find_repeats_bench.toml); S: the seed (default 28, as the bench manifests).
//
// Output, one JSON object per line and size (repeats adds "found", the count, so that the caller
// can count the bytes the operation must move):
//   {"op":"reduce","dtype":"f32","n":268435456,"median_ms":0.359100,"min_ms":0.355200,"reps":20,"check":"ok"}
//
// Inputs are drawn on the host once per size from a fixed seed, with the studies' distributions
// (another generator than kbench's, so not the same values): reduce i32 uniform in [-100, 100],
// f32 and f64 uniform in [0, 1); scan i32 uniform in [0, 9]; repeats: each element repeats its
// predecessor with probability P, otherwise is a fresh value in [-4, 4) different from it.
//
// Timing, as kbench's timer (src/device/timer.rs): temporary storage sized and allocated once per
// size, outside the timing; 3 warm-up calls; then R calls, each after an L2 flush that READS a
// buffer four times the L2's size (a write would leave L2 full of dirty lines whose write-back
// lands in the timed call: kernels/timer.cu), between two events on the default stream; the
// median and the minimum of the R times.
//
// Checks, after the timing: i32 sums, scans and repeats exactly (integers wrap modulo 2^32, as
// the GPU adds); f32 sums within a relative 1e-5 of a compensated double sum, f64 within 1e-12.
// Exit status: 0 all right; 1 some answer wrong (its line's check says WRONG and why, the other
// sizes still run); 2 bad usage or a CUDA error (the message names the call, file and line).

#include <cub/cub.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CUDA_CHECK(call) cuda_check((call), #call, __FILE__, __LINE__)

static void cuda_check(cudaError_t err, const char* what, const char* file, int line) {
    if (err != cudaSuccess) {
        std::fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", file, line, what,
                     cudaGetErrorString(err), cudaGetErrorName(err));
        std::exit(2);
    }
}

static const char* const USAGE =
    "usage: cub_peers OP DTYPE N [N...] [--reps R] [--repeats P] [--seed S]\n"
    "  OP DTYPE: reduce i32|f32|f64, scan i32, repeats i32; N: 2 .. 2147483647\n";

static void usage_error(const std::string& message) {
    std::fprintf(stderr, "cub_peers: %s\n%s", message.c_str(), USAGE);
    std::exit(2);
}

// A device allocation of `count` elements, freed when it goes out of scope.
template <typename T>
struct DeviceArray {
    T* ptr = nullptr;
    explicit DeviceArray(size_t count) { CUDA_CHECK(cudaMalloc(&ptr, std::max<size_t>(count, 1) * sizeof(T))); }
    ~DeviceArray() { cudaFree(ptr); }
    DeviceArray(const DeviceArray&) = delete;
    DeviceArray& operator=(const DeviceArray&) = delete;
};

// SplitMix64: small, fast and good enough for benchmark inputs.
struct Rng {
    uint64_t state;
    explicit Rng(uint64_t seed) : state(seed) {}
    uint64_t next() {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    // Uniform in [lo, hi]; the modulo's bias is below 2^-56 for ranges this small.
    int in_range(int lo, int hi) { return lo + static_cast<int>(next() % static_cast<uint64_t>(hi - lo + 1)); }
    double unit_f64() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }  // / 2^53
    float unit_f32() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }          // / 2^24
};

// kbench's kbench_flush_l2 (kernels/timer.cu): reads the zeroed buffer through L2 (__ldcg), so
// that L2 ends up holding clean lines only; `sink` is written only if the buffer is not all zeros,
// which it is, so the loads cannot be optimized away and nothing is written.
__global__ void flush_l2(const int4* __restrict__ buffer, unsigned long long n16, int* sink) {
    int acc = 0;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n16;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const int4 v = __ldcg(buffer + i);
        acc |= v.x | v.y | v.z | v.w;
    }
    if (acc != 0) *sink = acc;
}

// The cold-L2 flush before each timed call: a zeroed buffer four times the L2's size, read by
// 8 blocks of 256 threads an SM (kbench's launch).
struct L2Flush {
    int4* buffer = nullptr;
    int* sink = nullptr;
    unsigned long long n16 = 0;
    int grid = 0;

    L2Flush() {
        int device = 0, l2_bytes = 0, sm_count = 0;
        CUDA_CHECK(cudaGetDevice(&device));
        CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
        CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
        const size_t bytes = 4 * static_cast<size_t>(std::max(l2_bytes, 1 << 20));
        CUDA_CHECK(cudaMalloc(&buffer, bytes));
        CUDA_CHECK(cudaMemset(buffer, 0, bytes));
        CUDA_CHECK(cudaMalloc(&sink, sizeof(int)));
        n16 = bytes / 16;
        grid = 8 * sm_count;
    }
    ~L2Flush() {
        cudaFree(buffer);
        cudaFree(sink);
    }
    L2Flush(const L2Flush&) = delete;
    L2Flush& operator=(const L2Flush&) = delete;

    void run() const {
        flush_l2<<<grid, 256>>>(buffer, n16, sink);
        CUDA_CHECK(cudaGetLastError());
    }
};

struct Timing {
    double median_ms;
    double min_ms;
};

// Times `call` (which queues one CUB call on the default stream) as kbench does: 3 warm-up calls,
// then `reps` calls, each after the flush and between two events; the flush is outside them.
template <typename Call>
static Timing time_calls(const Call& call, const L2Flush& flush, int reps) {
    for (int i = 0; i < 3; ++i) call();
    CUDA_CHECK(cudaDeviceSynchronize());
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    std::vector<float> times_ms;
    for (int r = 0; r < reps; ++r) {
        flush.run();
        CUDA_CHECK(cudaEventRecord(start, 0));
        call();
        CUDA_CHECK(cudaEventRecord(stop, 0));
        CUDA_CHECK(cudaEventSynchronize(stop));
        float ms = 0.0f;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
        times_ms.push_back(ms);
    }
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    std::sort(times_ms.begin(), times_ms.end());
    const size_t mid = times_ms.size() / 2;
    const double median =
        times_ms.size() % 2 == 1 ? times_ms[mid] : 0.5 * (double(times_ms[mid - 1]) + double(times_ms[mid]));
    return {median, times_ms.front()};
}

// One line of output.
struct Case {
    std::string op, dtype;
    long long n = 0;
    int reps = 0;
    Timing timing = {0.0, 0.0};
    std::string check;    // "ok" or "WRONG: ..."
    long long found = -1; // repeats only: how many
};

static std::string describe(const char* fmt, double a, double b, double c = 0.0) {
    char text[256];
    std::snprintf(text, sizeof(text), fmt, a, b, c);
    return text;
}

// ---- reduce: cub::DeviceReduce::Sum ----

static int draw_reduce(Rng& rng, int*) { return rng.in_range(-100, 100); }
static float draw_reduce(Rng& rng, float*) { return rng.unit_f32(); }
static double draw_reduce(Rng& rng, double*) { return rng.unit_f64(); }

// Neumaier's compensated sum in double, as kbench's reference (src/numerics.rs).
template <typename T>
static double compensated_sum(const std::vector<T>& x) {
    double sum = 0.0, carry = 0.0;
    for (const T value : x) {
        const double v = static_cast<double>(value);
        const double t = sum + v;
        carry += std::fabs(sum) >= std::fabs(v) ? (sum - t) + v : (v - t) + sum;
        sum = t;
    }
    return sum + carry;
}

static std::string check_sum(const std::vector<int>& x, int got) {
    uint32_t wrapped = 0;  // the GPU's int additions wrap modulo 2^32
    for (const int v : x) wrapped += static_cast<uint32_t>(v);
    const int expected = static_cast<int>(wrapped);
    if (got == expected) return "ok";
    return describe("WRONG: sum %.0f, expected %.0f", got, expected);
}

static std::string check_relative(double got, double expected, double rel_tol) {
    const double rel_err = std::fabs(got - expected) / std::max(std::fabs(expected), 1e-300);
    if (rel_err <= rel_tol) return "ok";
    return describe("WRONG: sum %.17g, expected %.17g (relative error %.3g)", got, expected, rel_err);
}

static std::string check_sum(const std::vector<float>& x, float got) {
    return check_relative(got, compensated_sum(x), 1e-5);
}

static std::string check_sum(const std::vector<double>& x, double got) {
    return check_relative(got, compensated_sum(x), 1e-12);
}

template <typename T>
static Case run_reduce(const char* dtype, int n, int reps, uint64_t seed, const L2Flush& flush) {
    // One stream per dtype, so that every n takes a prefix of the same draws.
    Rng rng(seed ^ (0x5ED0001ull * sizeof(T)) ^ static_cast<uint64_t>(dtype[0]));
    std::vector<T> x(n);
    for (T& v : x) v = draw_reduce(rng, static_cast<T*>(nullptr));
    DeviceArray<T> d_in(n), d_out(1);
    CUDA_CHECK(cudaMemcpy(d_in.ptr, x.data(), n * sizeof(T), cudaMemcpyHostToDevice));

    void* d_temp_storage = nullptr;
    size_t temp_storage_bytes = 0;
    CUDA_CHECK(cub::DeviceReduce::Sum(d_temp_storage, temp_storage_bytes, d_in.ptr, d_out.ptr, n));
    DeviceArray<unsigned char> temp(temp_storage_bytes);
    d_temp_storage = temp.ptr;
    const Timing timing = time_calls(
        [&] { CUDA_CHECK(cub::DeviceReduce::Sum(d_temp_storage, temp_storage_bytes, d_in.ptr, d_out.ptr, n)); },
        flush, reps);

    T got;
    CUDA_CHECK(cudaMemcpy(&got, d_out.ptr, sizeof(T), cudaMemcpyDeviceToHost));
    Case c;
    c.op = "reduce";
    c.dtype = dtype;
    c.n = n;
    c.reps = reps;
    c.timing = timing;
    c.check = check_sum(x, got);
    return c;
}

// ---- scan: cub::DeviceScan::ExclusiveSum ----

static Case run_scan(int n, int reps, uint64_t seed, const L2Flush& flush) {
    Rng rng(seed ^ 0x5CA0001ull);
    std::vector<int> x(n);
    for (int& v : x) v = rng.in_range(0, 9);
    DeviceArray<int> d_in(n), d_out(n);
    CUDA_CHECK(cudaMemcpy(d_in.ptr, x.data(), n * sizeof(int), cudaMemcpyHostToDevice));

    void* d_temp_storage = nullptr;
    size_t temp_storage_bytes = 0;
    CUDA_CHECK(cub::DeviceScan::ExclusiveSum(d_temp_storage, temp_storage_bytes, d_in.ptr, d_out.ptr, n));
    DeviceArray<unsigned char> temp(temp_storage_bytes);
    d_temp_storage = temp.ptr;
    const Timing timing = time_calls(
        [&] {
            CUDA_CHECK(cub::DeviceScan::ExclusiveSum(d_temp_storage, temp_storage_bytes, d_in.ptr, d_out.ptr, n));
        },
        flush, reps);

    std::vector<int> got(n);
    CUDA_CHECK(cudaMemcpy(got.data(), d_out.ptr, n * sizeof(int), cudaMemcpyDeviceToHost));
    uint32_t running = 0;  // wraps modulo 2^32, as the GPU adds
    long long wrong = 0, first_wrong = -1;
    for (int i = 0; i < n; ++i) {
        if (got[i] != static_cast<int>(running)) {
            if (wrong == 0) first_wrong = i;
            ++wrong;
        }
        running += static_cast<uint32_t>(x[i]);
    }
    Case c;
    c.op = "scan";
    c.dtype = "i32";
    c.n = n;
    c.reps = reps;
    c.timing = timing;
    c.check = "ok";
    if (wrong > 0) {
        uint32_t expected = 0;
        for (long long i = 0; i < first_wrong; ++i) expected += static_cast<uint32_t>(x[i]);
        c.check = describe("WRONG: %.0f of the prefixes differ, the first at index %.0f: %.0f", double(wrong),
                         double(first_wrong), got[first_wrong]) +
                  describe(", expected %.0f", static_cast<int>(expected), 0.0);
    }
    return c;
}

// ---- repeats: cub::DeviceSelect::If over the indices ----

// Selects index i when a[i] == a[i+1]. CUB calls it only for the num_items = n - 1 indices
// 0 .. n-2 (the last tile's items past the end are guarded), so a[i + 1] stays inside a.
struct IsRepeat {
    const int* a;
    __host__ __device__ __forceinline__ bool operator()(const int& i) const { return a[i] == a[i + 1]; }
};

// find_repeats' input (src/algos/find_repeats.rs): each element repeats its predecessor with
// probability `repeat_share`, otherwise it is a fresh value in [-4, 4) different from it.
static std::vector<int> repeats_input(int n, double repeat_share, uint64_t seed) {
    Rng rng(seed ^ 0xF1D0001ull);
    std::vector<int> a(n);
    for (int i = 0; i < n; ++i) {
        if (i > 0 && rng.unit_f64() < repeat_share) {
            a[i] = a[i - 1];
            continue;
        }
        int v = rng.in_range(-4, 3);
        while (i > 0 && v == a[i - 1]) v = rng.in_range(-4, 3);
        a[i] = v;
    }
    return a;
}

static Case run_repeats(int n, double repeat_share, int reps, uint64_t seed, const L2Flush& flush) {
    const std::vector<int> a = repeats_input(n, repeat_share, seed);
    const int num_items = n - 1;  // candidate indices 0 .. n-2
    DeviceArray<int> d_a(n), d_indices(num_items), d_count(1);
    CUDA_CHECK(cudaMemcpy(d_a.ptr, a.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    const thrust::counting_iterator<int> d_in(0);
    const IsRepeat is_repeat{d_a.ptr};

    void* d_temp_storage = nullptr;
    size_t temp_storage_bytes = 0;
    CUDA_CHECK(cub::DeviceSelect::If(d_temp_storage, temp_storage_bytes, d_in, d_indices.ptr, d_count.ptr,
                                     num_items, is_repeat));
    DeviceArray<unsigned char> temp(temp_storage_bytes);
    d_temp_storage = temp.ptr;
    const Timing timing = time_calls(
        [&] {
            CUDA_CHECK(cub::DeviceSelect::If(d_temp_storage, temp_storage_bytes, d_in, d_indices.ptr, d_count.ptr,
                                             num_items, is_repeat));
        },
        flush, reps);

    std::vector<int> expected;
    for (int i = 0; i < num_items; ++i)
        if (a[i] == a[i + 1]) expected.push_back(i);
    int count = 0;
    CUDA_CHECK(cudaMemcpy(&count, d_count.ptr, sizeof(int), cudaMemcpyDeviceToHost));
    Case c;
    c.op = "repeats";
    c.dtype = "i32";
    c.n = n;
    c.reps = reps;
    c.timing = timing;
    c.found = count;
    c.check = "ok";
    if (count != static_cast<int>(expected.size())) {
        c.check = describe("WRONG: count %.0f, expected %.0f", count, double(expected.size()));
        return c;
    }
    std::vector<int> got(expected.size());
    if (!got.empty())
        CUDA_CHECK(cudaMemcpy(got.data(), d_indices.ptr, got.size() * sizeof(int), cudaMemcpyDeviceToHost));
    for (size_t k = 0; k < got.size(); ++k) {
        if (got[k] != expected[k]) {
            c.check = describe("WRONG: index %.0f of the repeats is %.0f, expected %.0f", double(k), got[k],
                             expected[k]);
            break;
        }
    }
    return c;
}

// ---- command line and output ----

struct Args {
    std::string op, dtype;
    std::vector<int> sizes;
    int reps = 20;
    double repeat_share = 0.1;
    uint64_t seed = 28;
};

static long long parse_integer(const char* text, const char* what, long long lo, long long hi) {
    char* end = nullptr;
    errno = 0;
    const long long value = std::strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || value < lo || value > hi)
        usage_error(std::string(what) + " must be an integer from " + std::to_string(lo) + " to " +
                    std::to_string(hi) + ", got '" + text + "'");
    return value;
}

static Args parse_args(int argc, char** argv) {
    if (argc < 4) usage_error("too few arguments");
    Args args;
    args.op = argv[1];
    args.dtype = argv[2];
    const bool known = (args.op == "reduce" && (args.dtype == "i32" || args.dtype == "f32" || args.dtype == "f64")) ||
                       ((args.op == "scan" || args.op == "repeats") && args.dtype == "i32");
    if (!known) usage_error("unknown OP DTYPE '" + args.op + " " + args.dtype + "'");
    for (int i = 3; i < argc; ++i) {
        const std::string arg = argv[i];
        const bool has_value = i + 1 < argc;
        if (arg == "--reps" && has_value) {
            args.reps = static_cast<int>(parse_integer(argv[++i], "--reps", 1, 100000));
        } else if (arg == "--seed" && has_value) {
            args.seed = static_cast<uint64_t>(parse_integer(argv[++i], "--seed", 0, LLONG_MAX));
        } else if (arg == "--repeats" && has_value) {
            char* end = nullptr;
            const char* text = argv[++i];
            args.repeat_share = std::strtod(text, &end);
            if (end == text || *end != '\0' || !(args.repeat_share >= 0.0 && args.repeat_share <= 1.0))
                usage_error(std::string("--repeats must be a number from 0 to 1, got '") + text + "'");
        } else if (arg.size() > 1 && arg[0] == '-') {
            usage_error("unknown option or missing value: '" + arg + "'");
        } else {
            args.sizes.push_back(static_cast<int>(parse_integer(argv[i], "N", 2, INT_MAX)));
        }
    }
    if (args.sizes.empty()) usage_error("no size N given");
    return args;
}

static std::string json_escape(const std::string& text) {
    std::string out;
    for (const char ch : text) {
        if (ch == '"' || ch == '\\') out += '\\';
        out += ch;
    }
    return out;
}

static void print_case(const Case& c) {
    std::printf("{\"op\":\"%s\",\"dtype\":\"%s\",\"n\":%lld,\"median_ms\":%.6f,\"min_ms\":%.6f,"
                "\"reps\":%d,\"check\":\"%s\"",
                c.op.c_str(), c.dtype.c_str(), c.n, c.timing.median_ms, c.timing.min_ms, c.reps,
                json_escape(c.check).c_str());
    if (c.found >= 0) std::printf(",\"found\":%lld", c.found);
    std::printf("}\n");
    std::fflush(stdout);
}

static Case run_case(const Args& args, int n, const L2Flush& flush) {
    if (args.op == "scan") return run_scan(n, args.reps, args.seed, flush);
    if (args.op == "repeats") return run_repeats(n, args.repeat_share, args.reps, args.seed, flush);
    if (args.dtype == "i32") return run_reduce<int>("i32", n, args.reps, args.seed, flush);
    if (args.dtype == "f32") return run_reduce<float>("f32", n, args.reps, args.seed, flush);
    return run_reduce<double>("f64", n, args.reps, args.seed, flush);
}

int main(int argc, char** argv) {
    const Args args = parse_args(argc, argv);
    const L2Flush flush;
    bool all_right = true;
    for (const int n : args.sizes) {
        const Case c = run_case(args, n, flush);
        print_case(c);
        if (c.check != "ok") all_right = false;
    }
    return all_right ? 0 : 1;
}
