//! The table `kbench kernels` prints from ptxas's report: registers, spills, stack and shared
//! memory per kernel and architecture, then the kernels that spill.

use super::case_table::{draw_columns, Column, TableStyle};
use super::text::wrap;
use crate::device::nvrtc::PtxasReport;

/// The reports as a table of at most `width` columns (short headers in two lines, sizes in
/// bytes), then a line naming the kernels that spill registers, if any.
pub fn render(reports: &[PtxasReport], width: Option<usize>) -> String {
    let column = |header: &str, cell: &dyn Fn(&PtxasReport) -> String| {
        Column::new(header, reports.iter().map(cell).collect())
    };
    let columns = vec![
        column("kernel", &|r| r.kernel.clone()),
        column("arch", &|r| r.arch.clone()),
        column("regs", &|r| r.registers.to_string()).numeric(),
        column("spill\nstores", &|r| r.spill_store_bytes.to_string()).numeric(),
        column("spill\nloads", &|r| r.spill_load_bytes.to_string()).numeric(),
        column("stack", &|r| r.stack_bytes.to_string()).numeric(),
        column("shared", &|r| r.shared_bytes.to_string()).numeric(),
    ];
    let drawn = draw_columns(columns, TableStyle::Terminal, width);
    let mut out = format!("{}\n", drawn.table);
    out.push_str(&wrap(
        "(regs: registers per thread; spills, stack and shared memory in bytes)",
        width,
        " ",
    ));
    let spilling: Vec<&str> = reports
        .iter()
        .filter(|r| r.spill_store_bytes + r.spill_load_bytes > 0)
        .map(|r| r.kernel.as_str())
        .collect();
    if !spilling.is_empty() {
        out.push_str(&wrap(
            &format!(
                "kernels that spill registers to local memory: {}",
                spilling.join(", ")
            ),
            width,
            "    ",
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
        let text = render(&[report("tidy", 0), report("spiller", 8)], None);
        assert!(text.contains("tidy") && text.contains("spiller"), "{text}");
        assert!(
            text.ends_with("kernels that spill registers to local memory: spiller\n"),
            "{text}"
        );
        assert!(!render(&[report("tidy", 0)], None).contains("spill registers"));
    }

    #[test]
    fn the_table_fits_80_columns_with_the_longest_kernel_name() {
        let name = crate::algos::all()
            .iter()
            .flat_map(|a| a.spec().kernels.iter())
            .max_by_key(|k| k.len())
            .expect("kbench has kernels")
            .to_string();
        // PTX entries carry their dtype: `durbin_persistent_f64`.
        let name = format!("{name}_f64");
        let name = name.as_str();
        let text = render(&[report(name, 8), report("tidy", 0)], Some(80));
        for line in text.lines() {
            assert!(
                unicode_width::UnicodeWidthStr::width(line) <= 80,
                "{} columns: {line}\n{text}",
                unicode_width::UnicodeWidthStr::width(line)
            );
        }
        assert!(text.contains(name), "{text}");
        // The former headers alone made the table 110 columns wide.
        assert!(!text.contains("spill stores (B)"), "{text}");
    }
}
