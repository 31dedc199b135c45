//! Output files the core writes (`trace gen`, `trace convert`): atomic onto regular files and
//! new paths, through onto devices and FIFOs, never replacing a symlink or a device node.
//!
//! Why: writing to a temporary file beside `NAME` and renaming it onto `NAME` means an
//! interrupted run never leaves half a file, but renaming onto `/dev/null` or a symlink replaces
//! them with a regular file. So a symlink is followed and its target written atomically;
//! anything that is not a regular file is written in place. Missing parent folders are created.
//! The temporary file has a short unique name (`.pmsim-PID-N.partial`: a 255-byte `NAME` still
//! works), is created exclusively (never through a file or symlink someone put there, never
//! shared with a concurrent writer) and gets the mode of the file it replaces. The Python side
//! (`python/pmsim/output.py`) follows the same rules.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

/// Where to write `dst`, and whether through a temporary file beside it (else in place).
fn plan(dst: &str) -> Result<(PathBuf, bool), String> {
    let p = Path::new(dst);
    let link = std::fs::symlink_metadata(p).map(|m| m.file_type().is_symlink()).unwrap_or(false);
    match std::fs::metadata(p) {
        Ok(m) if m.is_dir() => Err(format!("{dst}: is a directory")),
        Ok(m) if m.is_file() => {
            let real =
                if link { std::fs::canonicalize(p).map_err(|e| format!("{dst}: {e}"))? } else { p.to_path_buf() };
            Ok((real, true))
        }
        Ok(_) => Ok((p.to_path_buf(), false)),
        Err(_) if link => Err(format!("{dst}: is a symlink to a missing file; not writing through it")),
        Err(_) => {
            if let Some(parent) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("{}: cannot create folder: {e}", parent.display()))?;
            }
            Ok((p.to_path_buf(), true))
        }
    }
}

/// A new temporary file beside `target`, created exclusively, with `target`'s mode if it exists
/// (else the default a new file gets).
fn create_temp(dst: &str, target: &Path) -> Result<(File, PathBuf), String> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mode = std::fs::metadata(target).ok().map(|m| m.permissions());
    loop {
        let name = format!(".pmsim-{}-{}.partial", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let tmp = dir.join(name);
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => {
                if let Some(m) = &mode {
                    let _ = f.set_permissions(m.clone());
                }
                return Ok((f, tmp));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("{dst}: cannot create: {e}")),
        }
    }
}

/// Writes `dst` with `body`; on error nothing is left behind (or, writing through a device,
/// whatever the device took).
pub fn write_with<T>(dst: &str, body: impl FnOnce(BufWriter<File>) -> Result<T, String>) -> Result<T, String> {
    let (target, atomic) = plan(dst)?;
    let (f, tmp) = if atomic {
        let (f, tmp) = create_temp(dst, &target)?;
        (f, Some(tmp))
    } else {
        (File::create(&target).map_err(|e| format!("{dst}: cannot create: {e}"))?, None)
    };
    match body(BufWriter::new(f)) {
        Ok(v) => {
            if let Some(t) = &tmp {
                if let Err(e) = std::fs::rename(t, &target) {
                    let _ = std::fs::remove_file(t);
                    return Err(format!("{dst}: {e}"));
                }
            }
            Ok(v)
        }
        Err(e) => {
            if let Some(t) = &tmp {
                let _ = std::fs::remove_file(t);
            }
            Err(e)
        }
    }
}
