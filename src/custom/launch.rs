//! The launcher of a custom kernel sequence: its planned launches (`schedule`) resolved once per
//! case, before any timing, into kernels and argument lists over the case's device buffers, and
//! the scratch buffers allocated then too; a run only queues the launches.
//!
//! Every buffer a custom kernel sees has guard zones (`device::guard`): the case's inputs and
//! outputs because `BoundCase::guard_buffers` asks the executor for them, the scratch because
//! they are allocated here with them. `check_guards` reads all of them after the runs.

use anyhow::{anyhow, Result};

use super::schedule::{PlannedArg, PlannedLaunch};
use crate::algos::Unrunnable;
use crate::device::{Arg, DeviceBuf, DeviceIo, Dims, Gpu, Kernel, Launcher};
use crate::vocab::DType;

pub struct CustomLauncher<'a> {
    launches: Vec<(Kernel, Dims, Vec<Arg>)>,
    /// Kept alive while the launches use them.
    scratch: Vec<(String, DeviceBuf)>,
    io: &'a DeviceIo,
}

impl<'a> CustomLauncher<'a> {
    pub fn new(
        gpu: Gpu<'a>,
        io: &'a DeviceIo,
        scratch: impl Iterator<Item = (String, DType, usize)>,
        planned: Vec<PlannedLaunch>,
    ) -> Result<Self> {
        let scratch: Vec<(String, DeviceBuf)> = scratch
            .map(|(name, dtype, len)| Ok((name, gpu.alloc_guarded(dtype, len)?)))
            .collect::<Result<_>>()?;
        // An output is what the kernels write (an in-out buffer's copy of its input included);
        // then the inputs; then the scratch.
        let address = |name: &str| -> Result<Arg> {
            if let Ok(buf) = io.output(name) {
                return Ok(buf.arg());
            }
            if let Ok(buf) = io.input(name) {
                return Ok(buf.arg());
            }
            (scratch.iter())
                .find(|(n, _)| n == name)
                .map(|(_, b)| b.arg())
                .ok_or_else(|| anyhow!("kbench bug: no buffer `{name}` for the launch"))
        };
        let mut launches = Vec::new();
        for launch in planned {
            let kernel = gpu.kernel(&launch.kernel)?;
            runnable(&kernel, launch.dims, gpu.shared_optin_bytes())?;
            if launch.dims.shared_bytes > 48 * 1024 {
                kernel.allow_dynamic_shared(launch.dims.shared_bytes)?;
            }
            let args = (launch.args.iter())
                .map(|a| match a {
                    PlannedArg::Buffer(name) => address(name),
                    PlannedArg::Value(v) => Ok(*v),
                })
                .collect::<Result<Vec<_>>>()?;
            launches.push((kernel, launch.dims, args));
        }
        Ok(CustomLauncher {
            launches,
            scratch,
            io,
        })
    }
}

/// Whether this GPU can run `kernel` with `dims`: a block within what its registers allow, and
/// its static and dynamic shared memory within the device's. `Err(Unrunnable)` skips the case.
fn runnable(kernel: &Kernel, dims: Dims, shared_optin_bytes: u32) -> Result<()> {
    let (x, y, z) = dims.block;
    let threads = x * y * z;
    let most = kernel.max_threads_per_block()?;
    if threads > most {
        let registers = kernel.registers()?;
        return Err(Unrunnable(format!(
            "kernel `{}` runs at most {most} threads a block on this GPU ({registers} registers a thread); the launch asks for {threads}",
            kernel.name()
        ))
        .into());
    }
    let shared = kernel.static_shared_bytes()? as u64 + dims.shared_bytes as u64;
    if shared > shared_optin_bytes as u64 {
        return Err(Unrunnable(format!(
            "kernel `{}` needs {shared} bytes of shared memory a block ({} static, {} dynamic); this GPU gives a block at most {shared_optin_bytes}",
            kernel.name(),
            shared - dims.shared_bytes as u64,
            dims.shared_bytes
        ))
        .into());
    }
    Ok(())
}

impl Launcher for CustomLauncher<'_> {
    fn launch(&mut self) -> Result<()> {
        for (kernel, dims, args) in &self.launches {
            // SAFETY: the manifest declares each argument's C type and the buffers' lengths;
            // kbench passes exactly those (pointers to whole allocations of the declared length,
            // scalars of the declared width). That they match the kernel's parameters and that
            // the kernel stays within the buffers is the user's declaration, which kbench cannot
            // prove: checking the list against the kernel's PTX parameters, and the guard
            // zones around the buffers (`check_guards`), are separate checks.
            unsafe { kernel.launch(*dims, args) }.map_err(|e| {
                // What `runnable` could not foresee (the driver's own accounting) skips the case
                // as well.
                let text = format!("{e:#}");
                match text.contains("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES") {
                    true => Unrunnable(text).into(),
                    false => e,
                }
            })?;
        }
        Ok(())
    }

    fn launches_per_run(&self) -> usize {
        self.launches.len()
    }

    fn graph_refused(&self) -> Option<&'static str> {
        None
    }

    fn check_guards(&self) -> Result<()> {
        let io = (self.io.inputs.iter()).chain(&self.io.outputs);
        for (name, buf) in io {
            buf.check_guards(name)?;
        }
        for (name, buf) in &self.scratch {
            buf.check_guards(name)?;
        }
        Ok(())
    }
}
