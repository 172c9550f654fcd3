//! Clocks, throttling and energy through NVML (nvml-wrapper, which loads libnvidia-ml at run
//! time): the SM and memory clocks and the reasons the driver gives for holding them down, read
//! after each GPU sample so that samples taken while the GPU throttled are discarded and re-taken,
//! as NVBench does; and the board's energy counter, read around a case's energy window (see
//! `Device::energy_window`). Optional: where NVML cannot be loaded, kbench says so and keeps every
//! sample; where the counter is not there, the fingerprint says so and cases have no energy.

use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::Clock;
use nvml_wrapper::Nvml;

use super::Device;

/// One reading after a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockReading {
    pub sm_clock_mhz: u32,
    pub sm_clock_max_mhz: u32,
    /// 0 where NVML does not say.
    pub memory_clock_mhz: u32,
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
            memory_clock_mhz: device.clock_info(Clock::Memory).unwrap_or(0),
            reasons: device
                .current_throttle_reasons()
                .map(|r| r.bits())
                .unwrap_or(0),
        })
    }
}

impl Clocks {
    /// The board's energy counter: millijoules since the driver loaded (Volta and later).
    pub fn energy_mj(&self) -> Result<u64, String> {
        let device = self
            .nvml
            .device_by_pci_bus_id(self.pci_bus_id.as_str())
            .map_err(|e| e.to_string())?;
        device
            .total_energy_consumption()
            .map_err(|e| format!("NVML's total energy counter is not readable on this GPU: {e}"))
    }
}

/// What the board's energy counter said over an energy window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EnergyReading {
    /// The counter's rise over the window.
    pub energy_mj: u64,
    /// From the first reading of the counter to the second.
    pub window_s: f64,
}

/// The counter's rise from `before` to `after`. It counts up from the driver's load and a u64
/// of millijoules does not wrap in any machine's life, so a fall means the driver was reloaded
/// between the readings (or the counter misbehaved): an error, not a wrapped difference.
pub fn energy_delta_mj(before_mj: u64, after_mj: u64) -> Result<u64, String> {
    after_mj.checked_sub(before_mj).ok_or_else(|| {
        format!(
            "the energy counter went down over the window ({before_mj} mJ, then {after_mj} mJ): was the driver reloaded?"
        )
    })
}

impl Device {
    /// Whether NVML's energy counter can be read here (else the fingerprint says why not).
    pub fn has_energy_counter(&self) -> bool {
        self.clocks.is_some() && self.fingerprint.energy_unavailable.is_none()
    }

    /// The board's energy over `runs` calls of `region`, queued back to back: the device
    /// drained, the counter read, the runs queued, the device drained again, the counter read.
    pub fn energy_window(
        &self,
        runs: u32,
        region: &mut dyn FnMut() -> anyhow::Result<()>,
    ) -> anyhow::Result<EnergyReading> {
        let Some(clocks) = &self.clocks else {
            anyhow::bail!("NVML is not there to read the energy counter");
        };
        // CUPTI's activity records stay off through the window: its thousands of launches
        // belong to no sample, and left on they were the next case's first sample's records.
        if let Some(tracer) = &self.tracer {
            tracer.pause().map_err(anyhow::Error::msg)?;
        }
        let window = (|| {
            self.synchronize()?;
            let before_mj = clocks.energy_mj().map_err(anyhow::Error::msg)?;
            let started = std::time::Instant::now();
            for _ in 0..runs {
                region()?;
            }
            self.synchronize()?;
            let window_s = started.elapsed().as_secs_f64();
            let after_mj = clocks.energy_mj().map_err(anyhow::Error::msg)?;
            anyhow::Ok((before_mj, after_mj, window_s))
        })();
        if let Some(tracer) = &self.tracer {
            tracer.resume().map_err(anyhow::Error::msg)?;
        }
        let (before_mj, after_mj, window_s) = window?;
        Ok(EnergyReading {
            energy_mj: energy_delta_mj(before_mj, after_mj).map_err(anyhow::Error::msg)?,
            window_s,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_energy_counter_rises_and_a_fall_is_an_error_not_a_wrap() {
        assert_eq!(energy_delta_mj(1_000, 36_000), Ok(35_000));
        assert_eq!(energy_delta_mj(7, 7), Ok(0));
        // Near the top of the counter's range: a plain difference, no overflow.
        assert_eq!(energy_delta_mj(u64::MAX - 10, u64::MAX), Ok(10));
        let fell = energy_delta_mj(36_000, 1_000).unwrap_err();
        assert!(
            fell.contains("went down") && fell.contains("36000 mJ"),
            "{fell}"
        );
    }

    fn reading(sm: u32, reasons: ThrottleReasons) -> ClockReading {
        ClockReading {
            sm_clock_mhz: sm,
            sm_clock_max_mhz: 1980,
            memory_clock_mhz: 2619,
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
