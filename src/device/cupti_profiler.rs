//! The third timer: CUPTI's range profiler, the Profiling API Nsight Compute itself reads, gives
//! each kernel's `gpu__time_duration` (one range a kernel, each kernel run alone). CUPTI's
//! activity records (`cupti`) start a kernel when its first block starts; this metric also counts
//! the GPU's processing of the launch, as the events and Nsight Compute do, so on kernels of a few
//! microseconds it is the one to hold the events against. Measured on an H100 (a 2^16-element
//! sum, cold L2): profiler 3.23 µs, Nsight Compute 3.30 µs, activity records 1.99 µs.
//!
//! Profiled runs are extra runs after a case's samples: the profiler runs each kernel by itself
//! and waits for it, which a held stream cannot survive. Optional: without the library, under
//! Nsight Compute (which holds the profiler) or without the right to read GPU counters, kbench
//! says why and goes on.

use std::ffi::{c_char, CStr};

use cudarc::cupti::sys::{self, CUptiResult};

/// The metric Nsight Compute reports as a kernel's duration.
const METRIC: &CStr = c"gpu__time_duration.sum";
/// Every CUPTI function this module calls.
const REQUIRED_SYMBOLS: [&[u8]; 18] = [
    b"cuptiProfilerInitialize\0",
    b"cuptiProfilerDeInitialize\0",
    b"cuptiDeviceGetChipName\0",
    b"cuptiProfilerHostInitialize\0",
    b"cuptiProfilerHostDeinitialize\0",
    b"cuptiProfilerHostConfigAddMetrics\0",
    b"cuptiProfilerHostGetConfigImageSize\0",
    b"cuptiProfilerHostGetConfigImage\0",
    b"cuptiProfilerHostEvaluateToGpuValues\0",
    b"cuptiRangeProfilerEnable\0",
    b"cuptiRangeProfilerDisable\0",
    b"cuptiRangeProfilerGetCounterDataSize\0",
    b"cuptiRangeProfilerCounterDataImageInitialize\0",
    b"cuptiRangeProfilerSetConfig\0",
    b"cuptiRangeProfilerStart\0",
    b"cuptiRangeProfilerStop\0",
    b"cuptiRangeProfilerDecodeData\0",
    b"cuptiRangeProfilerGetCounterDataInfo\0",
];
/// The most kernels one profiled run may launch: each is one range of the counter data.
pub const MAX_PROFILED_LAUNCHES: usize = 64;

/// A zeroed CUPTI parameter struct with its `structSize` set, as every CUPTI call takes them:
/// the end of its `last` field, as CUPTI's `_STRUCT_SIZE` macros say, not `size_of` (which
/// counts trailing padding, and which CUPTI refuses as an invalid parameter). Every such struct
/// starts with `structSize: usize`, and all-zero is valid for each of their fields (pointers,
/// sizes, and enums whose 0 is a variant).
macro_rules! params {
    ($t:ident, $last:ident) => {{
        // SAFETY: see above; `$t` is one of cudarc's `repr(C)` CUPTI parameter structs.
        let mut p: sys::$t = unsafe { std::mem::zeroed() };
        p.structSize = std::mem::offset_of!(sys::$t, $last) + std::mem::size_of_val(&p.$last);
        p
    }};
}

fn check(what: &str, result: CUptiResult) -> Result<(), String> {
    if result == CUptiResult::CUPTI_SUCCESS {
        return Ok(());
    }
    let mut text: *const c_char = std::ptr::null();
    // SAFETY: CUPTI writes a pointer to a static string, or leaves it null.
    unsafe { sys::cuptiGetResultString(result, &mut text) };
    let text = if text.is_null() {
        format!("{result:?}")
    } else {
        // SAFETY: non-null, static and NUL-terminated.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    };
    Err(format!("{what}: {text}"))
}

/// The range profiler of one CUDA context, set up for `gpu__time_duration`. Enabled on the
/// context for its whole life: disabling and enabling it again crashed CUPTI 13.0 on an H100.
/// Enabled but not started, it leaves the samples alone (their kernels are timed behind a held
/// stream, so launch costs fall outside the events anyway).
pub struct KernelProfiler {
    ctx: cudarc::driver::sys::CUcontext,
    host: *mut sys::CUpti_Profiler_Host_Object,
    ranges: *mut sys::CUpti_RangeProfiler_Object,
    config_image: Vec<u8>,
    counter_data: std::cell::RefCell<Vec<u8>>,
}

impl KernelProfiler {
    /// Sets the profiler up on `ctx` (device `ordinal`), or says why it cannot be. CUPTI must
    /// already be loaded (the activity tracer loads it).
    pub fn start(
        ctx: cudarc::driver::sys::CUcontext,
        ordinal: usize,
    ) -> Result<KernelProfiler, String> {
        // cudarc panics on a call whose symbol its library lacks; the range profiler and its
        // host API came with CUPTI 12.6, and an older libcupti still serves the activity records.
        for symbol in REQUIRED_SYMBOLS {
            // SAFETY: only looks the symbol up; the library is loaded (see above).
            if unsafe { sys::culib().get::<*const ()>(symbol) }.is_err() {
                let name = String::from_utf8_lossy(&symbol[..symbol.len() - 1]);
                return Err(format!(
                    "this libcupti has no {name}: the range profiler needs CUPTI 12.6 or later"
                ));
            }
        }
        let mut init = params!(CUpti_Profiler_Initialize_Params, pPriv);
        // SAFETY (all calls below): each takes its own parameter struct, filled as CUPTI's
        // documentation asks; pointers handed in outlive the call.
        check("cuptiProfilerInitialize (a profiler attached?)", unsafe {
            sys::cuptiProfilerInitialize(&mut init)
        })?;
        // From here on, dropping `profiler` undoes whatever was set up.
        let mut profiler = KernelProfiler {
            ctx,
            host: std::ptr::null_mut(),
            ranges: std::ptr::null_mut(),
            config_image: Vec::new(),
            counter_data: std::cell::RefCell::new(Vec::new()),
        };
        let mut chip = params!(CUpti_Device_GetChipName_Params, pChipName);
        chip.deviceIndex = ordinal;
        check("cuptiDeviceGetChipName", unsafe {
            sys::cuptiDeviceGetChipName(&mut chip)
        })?;
        let mut host = params!(CUpti_Profiler_Host_Initialize_Params, pHostObject);
        host.profilerType = sys::CUpti_ProfilerType::CUPTI_PROFILER_TYPE_RANGE_PROFILER;
        host.pChipName = chip.pChipName;
        check("cuptiProfilerHostInitialize", unsafe {
            sys::cuptiProfilerHostInitialize(&mut host)
        })?;
        profiler.host = host.pHostObject;
        let mut metrics = [METRIC.as_ptr()];
        let mut add = params!(CUpti_Profiler_Host_ConfigAddMetrics_Params, numMetrics);
        add.pHostObject = profiler.host;
        add.ppMetricNames = metrics.as_mut_ptr();
        add.numMetrics = 1;
        check("cuptiProfilerHostConfigAddMetrics", unsafe {
            sys::cuptiProfilerHostConfigAddMetrics(&mut add)
        })?;
        let mut size = params!(
            CUpti_Profiler_Host_GetConfigImageSize_Params,
            configImageSize
        );
        size.pHostObject = profiler.host;
        check("cuptiProfilerHostGetConfigImageSize", unsafe {
            sys::cuptiProfilerHostGetConfigImageSize(&mut size)
        })?;
        profiler.config_image = vec![0; size.configImageSize];
        let mut image = params!(CUpti_Profiler_Host_GetConfigImage_Params, pConfigImage);
        image.pHostObject = profiler.host;
        image.configImageSize = profiler.config_image.len();
        image.pConfigImage = profiler.config_image.as_mut_ptr();
        check("cuptiProfilerHostGetConfigImage", unsafe {
            sys::cuptiProfilerHostGetConfigImage(&mut image)
        })?;
        profiler.enable()?;
        let mut data_size = params!(
            CUpti_RangeProfiler_GetCounterDataSize_Params,
            counterDataSize
        );
        data_size.pRangeProfilerObject = profiler.ranges;
        data_size.pMetricNames = metrics.as_mut_ptr();
        data_size.numMetrics = 1;
        data_size.maxNumOfRanges = MAX_PROFILED_LAUNCHES;
        data_size.maxNumRangeTreeNodes = MAX_PROFILED_LAUNCHES as u32;
        check("cuptiRangeProfilerGetCounterDataSize", unsafe {
            sys::cuptiRangeProfilerGetCounterDataSize(&mut data_size)
        })?;
        profiler.counter_data = std::cell::RefCell::new(vec![0; data_size.counterDataSize]);
        Ok(profiler)
    }

    fn enable(&mut self) -> Result<(), String> {
        let mut enable = params!(CUpti_RangeProfiler_Enable_Params, pRangeProfilerObject);
        enable.ctx = self.ctx;
        // SAFETY: the context outlives the profiler (the device owns both).
        check("cuptiRangeProfilerEnable", unsafe {
            sys::cuptiRangeProfilerEnable(&mut enable)
        })?;
        self.ranges = enable.pRangeProfilerObject;
        Ok(())
    }

    fn disable(&mut self) {
        let ranges = std::mem::replace(&mut self.ranges, std::ptr::null_mut());
        if !ranges.is_null() {
            let mut disable = params!(CUpti_RangeProfiler_Disable_Params, pRangeProfilerObject);
            disable.pRangeProfilerObject = ranges;
            // SAFETY: the object came from `enable` and is released once.
            unsafe { sys::cuptiRangeProfilerDisable(&mut disable) };
        }
    }

    /// Profiles what `queue` launches (it must wait for its work before returning); returns the
    /// sum of the kernels' `gpu__time_duration` and how many kernels there were.
    pub fn profile(
        &self,
        queue: &mut dyn FnMut() -> anyhow::Result<()>,
    ) -> anyhow::Result<(f64, usize)> {
        let ranges = self.ranges;
        let mut data = self.counter_data.borrow_mut();
        let mut init = params!(
            CUpti_RangeProfiler_CounterDataImage_Initialize_Params,
            pCounterData
        );
        init.pRangeProfilerObject = ranges;
        init.pCounterData = data.as_mut_ptr();
        init.counterDataSize = data.len();
        let mut config = params!(CUpti_RangeProfiler_SetConfig_Params, targetNestingLevel);
        config.pRangeProfilerObject = ranges;
        config.pConfig = self.config_image.as_ptr();
        config.configSize = self.config_image.len();
        config.pCounterDataImage = data.as_mut_ptr();
        config.counterDataImageSize = data.len();
        // One range a kernel, each run alone: how Nsight Compute measures.
        config.range = sys::CUpti_ProfilerRange::CUPTI_AutoRange;
        config.replayMode = sys::CUpti_ProfilerReplayMode::CUPTI_KernelReplay;
        config.maxRangesPerPass = MAX_PROFILED_LAUNCHES;
        config.numNestingLevels = 1;
        config.minNestingLevel = 1;
        config.targetNestingLevel = 1;
        let mut start = params!(CUpti_RangeProfiler_Start_Params, pRangeProfilerObject);
        start.pRangeProfilerObject = ranges;
        // SAFETY (all calls below): as in `start`; the counter data stays borrowed throughout.
        unsafe {
            check(
                "cuptiRangeProfilerCounterDataImageInitialize",
                sys::cuptiRangeProfilerCounterDataImageInitialize(&mut init),
            )
            .and_then(|()| {
                check(
                    "cuptiRangeProfilerSetConfig",
                    sys::cuptiRangeProfilerSetConfig(&mut config),
                )
            })
            .and_then(|()| {
                check(
                    "cuptiRangeProfilerStart",
                    sys::cuptiRangeProfilerStart(&mut start),
                )
            })
            .map_err(anyhow::Error::msg)?;
        }
        let queued = queue();
        let mut stop = params!(CUpti_RangeProfiler_Stop_Params, isAllPassSubmitted);
        stop.pRangeProfilerObject = ranges;
        // Stopped whatever `queue` did, or the next profiled run could not start.
        let stopped = check("cuptiRangeProfilerStop", unsafe {
            sys::cuptiRangeProfilerStop(&mut stop)
        });
        queued?;
        stopped.map_err(anyhow::Error::msg)?;
        let mut decode = params!(CUpti_RangeProfiler_DecodeData_Params, numOfRangeDropped);
        decode.pRangeProfilerObject = ranges;
        check("cuptiRangeProfilerDecodeData", unsafe {
            sys::cuptiRangeProfilerDecodeData(&mut decode)
        })
        .map_err(anyhow::Error::msg)?;
        if decode.numOfRangeDropped > 0 {
            anyhow::bail!(
                "the run launched more than the {MAX_PROFILED_LAUNCHES} kernels a profiled run may"
            );
        }
        let mut info = params!(
            CUpti_RangeProfiler_GetCounterDataInfo_Params,
            numTotalRanges
        );
        info.pCounterDataImage = data.as_ptr();
        info.counterDataImageSize = data.len();
        check("cuptiRangeProfilerGetCounterDataInfo", unsafe {
            sys::cuptiRangeProfilerGetCounterDataInfo(&mut info)
        })
        .map_err(anyhow::Error::msg)?;
        let mut metrics = [METRIC.as_ptr()];
        let mut total_ns = 0.0;
        for range in 0..info.numTotalRanges {
            let mut value = 0.0f64;
            let mut evaluate = params!(
                CUpti_Profiler_Host_EvaluateToGpuValues_Params,
                pMetricValues
            );
            evaluate.pHostObject = self.host;
            evaluate.pCounterDataImage = data.as_ptr();
            evaluate.counterDataImageSize = data.len();
            evaluate.rangeIndex = range;
            evaluate.ppMetricNames = metrics.as_mut_ptr();
            evaluate.numMetrics = 1;
            evaluate.pMetricValues = &mut value;
            check("cuptiProfilerHostEvaluateToGpuValues", unsafe {
                sys::cuptiProfilerHostEvaluateToGpuValues(&mut evaluate)
            })
            .map_err(anyhow::Error::msg)?;
            total_ns += value;
        }
        Ok((total_ns * 1e-9, info.numTotalRanges))
    }
}

impl Drop for KernelProfiler {
    fn drop(&mut self) {
        self.disable();
        // SAFETY (both): the host object came from CUPTI in `start` and is released once;
        // errors on the way out change nothing.
        if !self.host.is_null() {
            let mut host = params!(CUpti_Profiler_Host_Deinitialize_Params, pHostObject);
            host.pHostObject = self.host;
            unsafe { sys::cuptiProfilerHostDeinitialize(&mut host) };
        }
        let mut deinit = params!(CUpti_Profiler_DeInitialize_Params, pPriv);
        unsafe { sys::cuptiProfilerDeInitialize(&mut deinit) };
    }
}
