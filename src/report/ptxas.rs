//! The table `kbench kernels` prints from ptxas's report: registers, spills, stack and shared
//! memory per kernel and architecture, then the kernels that spill.

use crate::device::nvrtc::PtxasReport;

/// The reports as a table, then a line naming the kernels that spill registers, if any.
pub fn render(reports: &[PtxasReport]) -> String {
    let mut builder = tabled::builder::Builder::default();
    builder.push_record([
        "kernel",
        "arch",
        "registers",
        "spill stores (B)",
        "spill loads (B)",
        "stack (B)",
        "shared (B)",
    ]);
    for r in reports {
        builder.push_record([
            r.kernel.clone(),
            r.arch.clone(),
            r.registers.to_string(),
            r.spill_store_bytes.to_string(),
            r.spill_load_bytes.to_string(),
            r.stack_bytes.to_string(),
            r.shared_bytes.to_string(),
        ]);
    }
    let mut out = format!(
        "{}\n",
        builder.build().with(tabled::settings::Style::rounded())
    );
    let spilling: Vec<&str> = reports
        .iter()
        .filter(|r| r.spill_store_bytes + r.spill_load_bytes > 0)
        .map(|r| r.kernel.as_str())
        .collect();
    if !spilling.is_empty() {
        out.push_str(&format!(
            "kernels that spill registers to local memory: {}\n",
            spilling.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(kernel: &str, spill_store_bytes: u32) -> PtxasReport {
        PtxasReport {
            kernel: kernel.into(),
            arch: "sm_90".into(),
            registers: 32,
            spill_store_bytes,
            spill_load_bytes: 0,
            stack_bytes: 0,
            shared_bytes: 1024,
        }
    }

    #[test]
    fn the_table_names_each_kernel_and_then_those_that_spill() {
        let text = render(&[report("tidy", 0), report("spiller", 8)]);
        assert!(text.contains("tidy") && text.contains("spiller"), "{text}");
        assert!(
            text.ends_with("kernels that spill registers to local memory: spiller\n"),
            "{text}"
        );
        assert!(!render(&[report("tidy", 0)]).contains("spill registers"));
    }
}
