//! GPU test of guard zones (`device::guard`): a tiny NVRTC kernel writes a chosen range of a
//! guarded buffer, in bounds, past its end and before its start, and `check_guards` must say
//! which. Needs a CUDA GPU: ignored by a plain `cargo test`, run on the GPU machine with
//! `--include-ignored`, where a missing GPU fails it.

use kbench::device::guard::{OutOfBounds, Side, GUARD_BYTES};
use kbench::device::{Arg, Device, DeviceBuf, Dims, Kernel, KernelFile, KernelSource};
use kbench::vocab::{DType, HostData};

/// Writes 1.0 to `y[first .. first + count]`, whatever `y`'s length.
const WRITE_RANGE: KernelFile = KernelFile::embedded(
    "guard_test.cu",
    r#"
extern "C" __global__ void write_range(float *y, int first, int count) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) y[first + i] = 1.0f;
}
"#,
);

const LEN: usize = 1000;

fn write_range(kernel: &Kernel, y: &DeviceBuf, first: i32, count: i32) {
    let blocks = (count as u32).div_ceil(256).max(1);
    // SAFETY: three arguments as the kernel declares them; `y` outlives the launch (the check
    // after it synchronizes). The out-of-bounds writes land in `y`'s own guard zones.
    unsafe {
        kernel.launch(
            Dims::linear(blocks, 256, 0),
            &[y.arg(), Arg::I32(first), Arg::I32(count)],
        )
    }
    .unwrap();
}

fn out_of_bounds(result: anyhow::Result<()>) -> OutOfBounds {
    let err = result.expect_err("the guard check should fail");
    err.downcast::<OutOfBounds>()
        .unwrap_or_else(|e| panic!("not an out-of-bounds error: {e:#}"))
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn writes_outside_a_guarded_buffer_are_caught_and_named() {
    let mut device = Device::open(KernelSource::default()).unwrap();
    let module = device.module(&WRITE_RANGE).unwrap();
    let gpu = device.gpu(&module);
    let kernel = gpu.kernel("write_range").unwrap();

    // In bounds: passes, and the buffer (not its guard) holds what the kernel wrote.
    let y = gpu.alloc_guarded(DType::F32, LEN).unwrap();
    assert_eq!(y.guard_bytes(), GUARD_BYTES);
    y.poison().unwrap();
    write_range(&kernel, &y, 0, LEN as i32);
    y.check_guards("y").unwrap();
    let mut host = HostData::zeros(DType::F32, LEN);
    y.copy_to_host(&mut host).unwrap();
    assert_eq!(host, HostData::F32(vec![1.0; LEN]));

    // Three floats one element past the end: bytes 4 to 15 after it.
    write_range(&kernel, &y, LEN as i32 + 1, 3);
    let err = out_of_bounds(y.check_guards("y"));
    assert_eq!(
        err.to_string(),
        "wrote 12 bytes past the end of `y` (nearest at byte 4 after it)"
    );
    // Refilled, the zones pass again.
    y.fill_guards().unwrap();
    y.check_guards("y").unwrap();

    // Two floats right before the start.
    let x = gpu.alloc_guarded(DType::F32, LEN).unwrap();
    write_range(&kernel, &x, -2, 2);
    let err = out_of_bounds(x.check_guards("x"));
    assert_eq!(err.damage.len(), 1);
    assert_eq!(err.damage[0].side, Side::Before);
    assert_eq!(
        err.to_string(),
        "wrote 8 bytes before the start of `x` (nearest at byte 0 before it)"
    );

    // An empty guarded buffer: its element 0 is already out of bounds.
    let empty = gpu.alloc_guarded(DType::F32, 0).unwrap();
    empty.poison().unwrap();
    empty.check_guards("empty").unwrap();
    write_range(&kernel, &empty, 0, 1);
    let err = out_of_bounds(empty.check_guards("empty"));
    assert_eq!(
        err.to_string(),
        "wrote 4 bytes past the end of `empty` (nearest at byte 0 after it)"
    );

    // A plain buffer has no guards and always passes.
    let plain = gpu.alloc(DType::F32, LEN).unwrap();
    assert_eq!(plain.guard_bytes(), 0);
    plain.check_guards("plain").unwrap();
}
