// Probe: does CUPTI's range profiler (the Profiling API Nsight Compute uses) give the same
// gpu__time_duration as ncu, where CUPTI's activity records read about 1 µs lower?
// Build and run on the GPU machine:
//   nvcc -O2 -arch=sm_90 -I$CUPTI/include scripts/lab/range_profiler_probe.cu -L$CUPTI/lib64 -lcupti -lcuda -o probe && ./probe
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CK(x) do { CUptiResult r_ = (x); if (r_ != CUPTI_SUCCESS) { const char* s; cuptiGetResultString(r_, &s); \
  printf("FAIL %s: %s\n", #x, s); exit(1);} } while (0)

__global__ void sum4(const float4* __restrict__ x, float* out, size_t n4) {
  float s = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
    float4 v = x[i]; s += v.x + v.y + v.z + v.w;
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, s);
}
__global__ void flush(const int4* buf, size_t n, int* sink) {
  int acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) acc ^= buf[i].x;
  if (acc == 0x12345678) *sink = acc;
}

static std::vector<std::pair<std::string, uint64_t>> g_act;
static void CUPTIAPI req(uint8_t** b, size_t* s, size_t* m) { *b = (uint8_t*)aligned_alloc(8, 8 << 20); *s = 8 << 20; *m = 0; }
static void CUPTIAPI done(CUcontext, uint32_t, uint8_t* b, size_t, size_t valid) {
  CUpti_Activity* r = nullptr;
  while (cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS)
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      auto* k = (CUpti_ActivityKernel9*)r;
      const char* nm = k->name; g_act.push_back({std::string(nm), (uint64_t)(k->end - k->start)});
    }
  free(b);
}

int main() {
  cudaFree(0);
  CUcontext ctx; cuCtxGetCurrent(&ctx);
  if (getenv("NO_PROBE")) {  // only the kernels, for ncu to time
    size_t flush_n = (size_t)200 << 20 >> 4;
    int4* fbuf; cudaMalloc(&fbuf, flush_n * 16); cudaMemset(fbuf, 1, flush_n * 16);
    int* sink; cudaMalloc(&sink, 4); float* out; cudaMalloc(&out, 4);
    for (int log2n : {16, 20, 24, 28}) {
      size_t n = (size_t)1 << log2n, n4 = n / 4;
      float* x; cudaMalloc(&x, n * 4); cudaMemset(x, 0, n * 4);
      int grid = std::min<size_t>((n4 + 511) / 512, 132 * 4);
      for (int rep = 0; rep < 7; ++rep) { flush<<<132 * 4, 512>>>(fbuf, flush_n, sink); sum4<<<grid, 512>>>((const float4*)x, out, n4); }
      cudaDeviceSynchronize(); cudaFree(x);
    }
    return 0;
  }
  bool with_activity = getenv("NO_ACTIVITY") == nullptr;
  if (with_activity) {
    CK(cuptiActivityRegisterCallbacks(req, done));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  }
  CUpti_Profiler_Initialize_Params ip{CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
  CK(cuptiProfilerInitialize(&ip));
  CUpti_Device_GetChipName_Params cp{CUpti_Device_GetChipName_Params_STRUCT_SIZE}; cp.deviceIndex = 0;
  CK(cuptiDeviceGetChipName(&cp));
  printf("chip %s\n", cp.pChipName);
  CUpti_Profiler_Host_Initialize_Params hp{CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
  hp.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER; hp.pChipName = cp.pChipName;
  CK(cuptiProfilerHostInitialize(&hp));
  const char* metrics[] = {"gpu__time_duration.sum"};
  CUpti_Profiler_Host_ConfigAddMetrics_Params am{CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
  am.pHostObject = hp.pHostObject; am.ppMetricNames = metrics; am.numMetrics = 1;
  CK(cuptiProfilerHostConfigAddMetrics(&am));
  CUpti_Profiler_Host_GetConfigImageSize_Params cs{CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
  cs.pHostObject = hp.pHostObject; CK(cuptiProfilerHostGetConfigImageSize(&cs));
  std::vector<uint8_t> config(cs.configImageSize);
  CUpti_Profiler_Host_GetConfigImage_Params ci{CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
  ci.pHostObject = hp.pHostObject; ci.configImageSize = config.size(); ci.pConfigImage = config.data();
  CK(cuptiProfilerHostGetConfigImage(&ci));
  CUpti_RangeProfiler_Enable_Params ep{CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE}; ep.ctx = ctx;
  CK(cuptiRangeProfilerEnable(&ep));
  const size_t ranges = 64;
  CUpti_RangeProfiler_GetCounterDataSize_Params ds{CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
  ds.pRangeProfilerObject = ep.pRangeProfilerObject; ds.pMetricNames = metrics; ds.numMetrics = 1;
  ds.maxNumOfRanges = ranges; ds.maxNumRangeTreeNodes = ranges;
  CK(cuptiRangeProfilerGetCounterDataSize(&ds));
  std::vector<uint8_t> data(ds.counterDataSize);

  size_t flush_n = (size_t)200 << 20 >> 4;  // 200 MB of int4
  int4* fbuf; cudaMalloc(&fbuf, flush_n * 16); cudaMemset(fbuf, 1, flush_n * 16);
  int* sink; cudaMalloc(&sink, 4);
  float* out; cudaMalloc(&out, 4);
  for (int log2n : {16, 20, 24, 28}) {
    size_t n = (size_t)1 << log2n, n4 = n / 4;
    float* x; cudaMalloc(&x, n * 4); cudaMemset(x, 0, n * 4);
    int grid = std::min<size_t>((n4 + 511) / 512, 132 * 4);
    for (int mode = 0; mode < 1; ++mode) {  // 0: auto range + kernel replay; 1: user range + user replay
      CUpti_RangeProfiler_CounterDataImage_Initialize_Params di{CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
      di.pRangeProfilerObject = ep.pRangeProfilerObject; di.pCounterData = data.data(); di.counterDataSize = data.size();
      CK(cuptiRangeProfilerCounterDataImageInitialize(&di));
      CUpti_RangeProfiler_SetConfig_Params sc{CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
      sc.pRangeProfilerObject = ep.pRangeProfilerObject; sc.pConfig = config.data(); sc.configSize = config.size();
      sc.pCounterDataImage = data.data(); sc.counterDataImageSize = data.size();
      sc.range = mode == 0 ? CUPTI_AutoRange : CUPTI_UserRange; sc.replayMode = mode == 0 ? CUPTI_KernelReplay : CUPTI_UserReplay;
      sc.maxRangesPerPass = ranges; sc.numNestingLevels = 1; sc.minNestingLevel = 1; sc.passIndex = 0; sc.targetNestingLevel = 1;
      CK(cuptiRangeProfilerSetConfig(&sc));
      CUpti_RangeProfiler_Start_Params st{CUpti_RangeProfiler_Start_Params_STRUCT_SIZE}; st.pRangeProfilerObject = ep.pRangeProfilerObject;
      CK(cuptiRangeProfilerStart(&st));
      for (int rep = 0; rep < 7; ++rep) {
        flush<<<132 * 4, 512>>>(fbuf, flush_n, sink);
        if (mode == 1) { CUpti_RangeProfiler_PushRange_Params pr{CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE};
          pr.pRangeProfilerObject = ep.pRangeProfilerObject; pr.pRangeName = "run"; CK(cuptiRangeProfilerPushRange(&pr)); }
        sum4<<<grid, 512>>>((const float4*)x, out, n4);
        if (mode == 1) { CUpti_RangeProfiler_PopRange_Params pp{CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
          pp.pRangeProfilerObject = ep.pRangeProfilerObject; CK(cuptiRangeProfilerPopRange(&pp)); }
      }
      CUpti_RangeProfiler_Stop_Params sp{CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE}; sp.pRangeProfilerObject = ep.pRangeProfilerObject;
      CK(cuptiRangeProfilerStop(&sp));
      CUpti_RangeProfiler_DecodeData_Params dd{CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE}; dd.pRangeProfilerObject = ep.pRangeProfilerObject;
      CK(cuptiRangeProfilerDecodeData(&dd));
      CUpti_RangeProfiler_GetCounterDataInfo_Params gi{CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
      gi.pCounterDataImage = data.data(); gi.counterDataImageSize = data.size();
      CK(cuptiRangeProfilerGetCounterDataInfo(&gi));
      printf("n=2^%d mode=%s allpass=%d dropped=%zu ranges=%zu:", log2n, mode ? "user" : "auto", sp.isAllPassSubmitted, dd.numOfRangeDropped, gi.numTotalRanges);
      std::vector<double> sums;
      for (size_t r = 0; r < gi.numTotalRanges; ++r) {
        CUpti_RangeProfiler_CounterData_GetRangeInfo_Params ri{CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE};
        ri.pCounterDataImage = data.data(); ri.counterDataImageSize = data.size(); ri.rangeIndex = r; ri.rangeDelimiter = "/";
        CK(cuptiRangeProfilerCounterDataGetRangeInfo(&ri));
        double v = 0;
        CUpti_Profiler_Host_EvaluateToGpuValues_Params ev{CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
        ev.pHostObject = hp.pHostObject; ev.pCounterDataImage = data.data(); ev.counterDataImageSize = data.size();
        ev.rangeIndex = r; ev.ppMetricNames = metrics; ev.numMetrics = 1; ev.pMetricValues = &v;
        CK(cuptiProfilerHostEvaluateToGpuValues(&ev));
        if (r % 2 == 1) sums.push_back(v);  // auto ranges are numbered: flush, sum4, flush, ...
        if (r < 3) printf(" [%s %.2fus]", ri.rangeName, v / 1e3);
      }
      std::sort(sums.begin(), sums.end());
      printf(" median sum4 %.3f us (of %zu)\n", sums.empty() ? 0 : sums[sums.size() / 2] / 1e3, sums.size());
    }
    if (with_activity) {
      g_act.clear();
      for (int rep = 0; rep < 7; ++rep) { flush<<<132 * 4, 512>>>(fbuf, flush_n, sink); sum4<<<grid, 512>>>((const float4*)x, out, n4); }
      cudaDeviceSynchronize(); cuptiActivityFlushAll(1);
      std::vector<double> a; for (auto& p : g_act) if (p.first.find("sum4") != std::string::npos) a.push_back(p.second);
      std::sort(a.begin(), a.end());
      printf("n=2^%d activity (profiler off) median %.3f us (of %zu)\n", log2n, a.empty() ? 0 : a[a.size() / 2] / 1e3, a.size());
    }
    cudaFree(x);
  }
  printf("ok\n");
}
