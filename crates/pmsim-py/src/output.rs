//! Output files the core writes (`trace gen`, `trace convert`): atomic onto regular files and
//! new paths, through onto devices and FIFOs, never replacing a symlink or a device node.
//!
//! Why: writing to `NAME.partial` and renaming onto `NAME` means an interrupted run never
//! leaves half a file, but renaming onto `/dev/null` or a symlink replaces them with a regular
//! file. So a symlink is followed and its target written atomically; anything that is not a
//! regular file is written in place. Missing parent folders are created. The Python side
//! (`python/pmsim/output.py`) follows the same rules.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

/// Where to write `dst`, and the temporary file to rename onto it (None: write in place).
fn plan(dst: &str) -> Result<(PathBuf, Option<PathBuf>), String> {
    let p = Path::new(dst);
    let link = std::fs::symlink_metadata(p).map(|m| m.file_type().is_symlink()).unwrap_or(false);
    match std::fs::metadata(p) {
        Ok(m) if m.is_dir() => Err(format!("{dst}: is a directory")),
        Ok(m) if m.is_file() => {
            let real =
                if link { std::fs::canonicalize(p).map_err(|e| format!("{dst}: {e}"))? } else { p.to_path_buf() };
            let mut tmp = real.clone().into_os_string();
            tmp.push(".partial");
            Ok((real, Some(PathBuf::from(tmp))))
        }
        Ok(_) => Ok((p.to_path_buf(), None)),
        Err(_) if link => Err(format!("{dst}: is a symlink to a missing file; not writing through it")),
        Err(_) => {
            if let Some(parent) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("{}: cannot create folder: {e}", parent.display()))?;
            }
            let mut tmp = p.as_os_str().to_owned();
            tmp.push(".partial");
            Ok((p.to_path_buf(), Some(PathBuf::from(tmp))))
        }
    }
}

/// Writes `dst` with `body`; on error nothing is left behind (or, writing through a device,
/// whatever the device took).
pub fn write_with<T>(dst: &str, body: impl FnOnce(BufWriter<File>) -> Result<T, String>) -> Result<T, String> {
    let (target, tmp) = plan(dst)?;
    let open_at = tmp.as_ref().unwrap_or(&target);
    let f = File::create(open_at).map_err(|e| format!("{dst}: cannot create: {e}"))?;
    match body(BufWriter::new(f)) {
        Ok(v) => {
            if let Some(t) = &tmp {
                std::fs::rename(t, &target).map_err(|e| format!("{dst}: {e}"))?;
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
