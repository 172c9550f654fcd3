//! Reading a file a user named: every reader of a path (manifests, Matrix Market files, mock
//! device files, results files and their journals, merge/compare/report inputs, a custom
//! study's `.npy` files and sources) goes through here, so that each one refuses a FIFO, a
//! device, a socket or a folder at once, naming what it is, and reads no more than its limit.
//!
//! Why not `fs::read`: opening a FIFO for reading blocks until a writer comes (forever, for a
//! `kbench report` of a pipe), and `/dev/zero` has no end (read until out of memory). The path
//! is stat'ed first (symlinks followed, so a link to `/dev/zero` is a device), then opened with
//! `O_NONBLOCK` (a FIFO swapped in after the stat cannot block the open) and stat'ed again
//! through the open handle (what is read is what was checked), then read to at most
//! `max_bytes + 1` bytes (a file that grows past the limit while read is still refused).

use std::fmt;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why a file was not read: what it was meant to be, its path, and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    /// "the manifest", "a Matrix Market file".
    pub what: String,
    pub path: PathBuf,
    /// "it is a FIFO (named pipe), not a regular file"; no path in it, for readers whose
    /// messages start with the path already.
    pub reason: String,
}

impl InputError {
    fn new(path: &Path, what: &str, reason: String) -> InputError {
        InputError {
            what: what.to_string(),
            path: path.to_path_buf(),
            reason,
        }
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot read {} `{}`: {}",
            self.what,
            self.path.display(),
            self.reason
        )
    }
}

impl std::error::Error for InputError {}

impl From<InputError> for String {
    fn from(e: InputError) -> String {
        e.to_string()
    }
}

/// What a path that is not a regular file is, in words; None for a regular file.
pub fn not_a_file_kind(metadata: &Metadata) -> Option<&'static str> {
    let kind = metadata.file_type();
    if kind.is_file() {
        None
    } else if kind.is_dir() {
        Some("a folder")
    } else if kind.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if kind.is_char_device() {
        Some("a character device")
    } else if kind.is_block_device() {
        Some("a block device")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    }
}

/// "`PATH` is a FIFO (named pipe), not a regular file" for a path that exists (symlinks
/// followed) but is not a regular file; None for a regular file or nothing there. For checks
/// that would otherwise say "no file" of a pipe or a folder.
pub fn not_a_file_message(path: &Path) -> Option<String> {
    let kind = not_a_file_kind(&fs::metadata(path).ok()?)?;
    Some(format!(
        "`{}` is {kind}, not a regular file",
        path.display()
    ))
}

/// The refusal of a path that is `kind` (from `not_a_file_kind`), for a reader of `what`.
fn not_a_file(path: &Path, what: &str, kind: &str) -> InputError {
    InputError::new(path, what, format!("it is {kind}, not a regular file"))
}

/// Opens `path` for reading once it is known to be a regular file (symlinks followed); a FIFO,
/// device, socket or folder is refused without blocking. `what` names the file in messages
/// ("the manifest", "a Matrix Market file").
pub fn open_regular_file(path: &Path, what: &str) -> Result<File, InputError> {
    let cannot = |e: std::io::Error| InputError::new(path, what, e.to_string());
    let metadata = fs::metadata(path).map_err(cannot)?;
    if let Some(kind) = not_a_file_kind(&metadata) {
        return Err(not_a_file(path, what, kind));
    }
    // O_NONBLOCK: were the path replaced by a FIFO since the stat above, the open returns at
    // once instead of waiting for a writer; the second stat below then refuses it.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(cannot)?;
    let opened = file.metadata().map_err(cannot)?;
    if let Some(kind) = not_a_file_kind(&opened) {
        return Err(not_a_file(path, what, kind));
    }
    Ok(file)
}

/// A regular file's bytes, at most `max_bytes` of them: a larger file is refused naming the
/// limit. See the module header for what is refused and why.
pub fn read_regular_file(path: &Path, what: &str, max_bytes: u64) -> Result<Vec<u8>, InputError> {
    read_opened(open_regular_file(path, what)?, path, what, max_bytes)
}

/// The bytes of a file `open_regular_file` opened (for a reader that looks at its size first),
/// at most `max_bytes` of them.
pub fn read_opened(
    file: File,
    path: &Path,
    what: &str,
    max_bytes: u64,
) -> Result<Vec<u8>, InputError> {
    let too_large = || {
        InputError::new(
            path,
            what,
            format!("it is larger than {}, the limit", bytes_text(max_bytes)),
        )
    };
    let size_bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    if size_bytes > max_bytes {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(size_bytes as usize);
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| InputError::new(path, what, e.to_string()))?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_large());
    }
    Ok(bytes)
}

/// A regular file's text, as `read_regular_file`, refusing bytes that are not UTF-8 at their
/// line.
pub fn read_regular_text(path: &Path, what: &str, max_bytes: u64) -> Result<String, InputError> {
    let bytes = read_regular_file(path, what, max_bytes)?;
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
        InputError::new(path, what, format!("line {line} is not UTF-8 text"))
    })
}

/// "1 MiB", "512 KiB" or "100 bytes": a limit as a person reads it.
pub fn bytes_text(bytes: u64) -> String {
    const UNITS: [(&str, u32); 3] = [("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for (unit, shift) in UNITS {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Runs `f` on another thread and fails the test if it takes more than 5 s: a FIFO that
    /// blocks must fail the test, not hang it.
    fn within_5_s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(5))
            .expect("the read did not return within 5 s (blocked?)")
    }

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo touches nothing else.
        let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
        assert_eq!(rc, 0, "mkfifo {}", path.display());
    }

    #[test]
    fn refuses_fifos_devices_folders_and_links_to_them_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe.mtx");
        mkfifo(&fifo);
        let link = dir.path().join("zero.mtx");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let cases = [
            (fifo, "a FIFO (named pipe)"),
            ("/dev/zero".into(), "a character device"),
            (link, "a character device"),
            (dir.path().to_path_buf(), "a folder"),
        ];
        for (path, kind) in cases {
            let started = Instant::now();
            let shown = path.clone();
            let e =
                within_5_s(move || read_regular_file(&path, "a test file", 1 << 20)).unwrap_err();
            assert!(
                e.to_string().contains(kind)
                    && e.to_string().contains(&shown.display().to_string()),
                "{shown:?}: {e}"
            );
            assert!(started.elapsed() < Duration::from_secs(1), "{shown:?}");
        }
    }

    #[test]
    fn not_a_file_message_names_only_what_exists_and_is_not_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.npy");
        fs::write(&file, b"x").unwrap();
        assert_eq!(not_a_file_message(&file), None);
        assert_eq!(not_a_file_message(&dir.path().join("missing.npy")), None);
        let message = not_a_file_message(dir.path()).unwrap();
        assert!(
            message.ends_with("` is a folder, not a regular file"),
            "{message}"
        );
    }

    #[test]
    fn caps_what_it_reads_and_names_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.json");
        fs::write(&path, vec![b'x'; 2049]).unwrap();
        let e = read_regular_file(&path, "a results file", 2048).unwrap_err();
        assert!(
            e.to_string().contains("cannot read a results file")
                && e.to_string().contains("larger than 2 KiB, the limit"),
            "{e}"
        );
        assert_eq!(read_regular_file(&path, "x", 2049).unwrap().len(), 2049);
    }

    #[test]
    fn a_missing_file_and_bad_utf8_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.toml");
        let e = read_regular_text(&missing, "the manifest", 100).unwrap_err();
        assert!(
            e.to_string().contains("cannot read the manifest")
                && e.to_string().contains("missing.toml"),
            "{e}"
        );
        let bad = dir.path().join("bad.txt");
        fs::write(&bad, b"ok\n\xff\n").unwrap();
        let e = read_regular_text(&bad, "a mock device file", 100).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("bad.txt`: line 2 is not UTF-8 text"),
            "{e}"
        );
    }
}
