//! The fuzzing runner's helper, called by `scripts/fuzz.sh`:
//!
//! ```text
//! crossdock-fuzz seeds DIR               DIR/<target>/: the seeds and the kept corpus of every target
//! crossdock-fuzz keep TARGET DIR         DIR's files (a minimized AFL++ queue) become corpus/TARGET.hex
//! crossdock-fuzz run TARGET FILE...      replays inputs (a crash AFL++ found) under the memory limit
//! ```

use std::path::Path;
use std::process::ExitCode;

use crossdock_fuzz::{corpus, seeds, Target};

fn target(name: &str) -> Result<Target, String> {
    Target::from_name(name).ok_or_else(|| {
        let names: Vec<_> = Target::ALL.iter().map(|t| t.name()).collect();
        format!("unknown target {name:?}; the targets: {}", names.join(", "))
    })
}

fn write_seeds(dir: &Path) -> Result<(), String> {
    for t in Target::ALL {
        let sub = dir.join(t.name());
        std::fs::create_dir_all(&sub).map_err(|e| format!("{}: {e}", sub.display()))?;
        let inputs = seeds::seeds(t).into_iter().chain(corpus::load(t));
        for (i, input) in inputs.enumerate() {
            let path = sub.join(format!("seed-{i:05}"));
            std::fs::write(&path, input).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok(())
}

fn keep(t: Target, dir: &Path) -> Result<(), String> {
    let mut inputs = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let path = e.map_err(|e| e.to_string())?.path();
        if path.is_file() {
            inputs.push(std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?);
        }
    }
    // Shortest first, then by content: the same queue gives the same file.
    inputs.sort_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
    inputs.dedup();
    let path = corpus::file(t);
    std::fs::write(&path, corpus::format(t, &inputs))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    println!("{}: {} inputs", path.display(), inputs.len());
    Ok(())
}

fn run(t: Target, files: &[String]) -> Result<(), String> {
    for f in files {
        let input = std::fs::read(f).map_err(|e| format!("{f}: {e}"))?;
        println!("{f}: {} bytes", input.len());
        t.run(&input);
    }
    println!("{} inputs, no failure", files.len());
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["seeds", dir] => write_seeds(Path::new(dir)),
        ["keep", t, dir] => target(t).and_then(|t| keep(t, Path::new(dir))),
        ["run", t, ..] => target(t).and_then(|t| run(t, &args[2..])),
        _ => Err("usage: crossdock-fuzz seeds DIR | keep TARGET DIR | run TARGET FILE...".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("crossdock-fuzz: {e}");
            ExitCode::FAILURE
        }
    }
}
