//! Clocks and throttling through NVML (nvml-wrapper, which loads libnvidia-ml at run time): the
//! SM clock and the reasons the driver gives for holding it down, read after each GPU sample so
//! that samples taken while the GPU throttled are discarded and re-taken, as NVBench does.
//! Optional: where NVML cannot be loaded, kbench says so and keeps every sample.

use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::Clock;
use nvml_wrapper::Nvml;

/// One reading after a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockReading {
    pub sm_clock_mhz: u32,
    pub sm_clock_max_mhz: u32,
    pub reasons: u64,
}

/// The reasons that mean the GPU ran slower than it can: thermal and power slowdowns. Idle,
/// application-clock settings and the power cap's ordinary management are not throttling.
const THROTTLING: ThrottleReasons = ThrottleReasons::HW_SLOWDOWN
    .union(ThrottleReasons::SW_THERMAL_SLOWDOWN)
    .union(ThrottleReasons::HW_THERMAL_SLOWDOWN)
    .union(ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN);

/// NVBench's rule: a sample whose SM clock was below 75% of the maximum ran throttled.
const MIN_CLOCK_SHARE: f64 = 0.75;

impl ClockReading {
    /// Whether a sample followed by this reading ran throttled.
    pub fn throttled(&self) -> bool {
        let reasons = ThrottleReasons::from_bits_truncate(self.reasons);
        let idle = reasons.contains(ThrottleReasons::GPU_IDLE);
        reasons.intersects(THROTTLING)
            || (!idle
                && self.sm_clock_max_mhz > 0
                && (self.sm_clock_mhz as f64) < MIN_CLOCK_SHARE * self.sm_clock_max_mhz as f64)
    }

    /// The throttling reasons set, by name (idle and clock settings left out).
    pub fn reason_names(&self) -> Vec<String> {
        let reasons = ThrottleReasons::from_bits_truncate(self.reasons)
            & THROTTLING.union(ThrottleReasons::SW_POWER_CAP);
        reasons
            .iter_names()
            .map(|(name, _)| name.to_lowercase())
            .collect()
    }
}

/// NVML, opened for the GPU with this PCI bus id.
pub struct Clocks {
    nvml: Nvml,
    pci_bus_id: String,
}

impl Clocks {
    pub fn open(pci_bus_id: &str) -> Result<Clocks, String> {
        let nvml = Nvml::init().map_err(|e| format!("NVML unavailable: {e}"))?;
        nvml.device_by_pci_bus_id(pci_bus_id)
            .map_err(|e| format!("NVML does not know the GPU at {pci_bus_id}: {e}"))?;
        Ok(Clocks {
            nvml,
            pci_bus_id: pci_bus_id.to_string(),
        })
    }

    pub fn read(&self) -> Result<ClockReading, String> {
        let device = self
            .nvml
            .device_by_pci_bus_id(self.pci_bus_id.as_str())
            .map_err(|e| e.to_string())?;
        Ok(ClockReading {
            sm_clock_mhz: device.clock_info(Clock::SM).map_err(|e| e.to_string())?,
            sm_clock_max_mhz: device.max_clock_info(Clock::SM).unwrap_or(0),
            reasons: device
                .current_throttle_reasons()
                .map(|r| r.bits())
                .unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(sm: u32, reasons: ThrottleReasons) -> ClockReading {
        ClockReading {
            sm_clock_mhz: sm,
            sm_clock_max_mhz: 1980,
            reasons: reasons.bits(),
        }
    }

    #[test]
    fn thermal_slowdowns_and_low_clocks_count_as_throttled_idle_does_not() {
        assert!(!reading(1980, ThrottleReasons::NONE).throttled());
        assert!(reading(1980, ThrottleReasons::HW_THERMAL_SLOWDOWN).throttled());
        assert!(reading(1000, ThrottleReasons::SW_POWER_CAP).throttled());
        assert!(!reading(1700, ThrottleReasons::SW_POWER_CAP).throttled());
        // Read while idle right after a sample: a low clock then says nothing about the sample.
        assert!(!reading(345, ThrottleReasons::GPU_IDLE).throttled());
        assert_eq!(
            reading(
                1980,
                ThrottleReasons::SW_THERMAL_SLOWDOWN | ThrottleReasons::GPU_IDLE
            )
            .reason_names(),
            vec!["sw_thermal_slowdown"]
        );
    }
}
