//! lava-man: writes LavaCore's man pages (see the `lava-man` library).
//!
//! ```text
//! lava-man --out DIR     # DIR/man1/NAME.1 and DIR/man8/NAME.8, one per program
//! lava-man --list        # SECTION NAME lines
//! lava-man NAME          # one page's roff source on standard output
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: lava-man --out DIR | --list | NAME";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let pages = lava_man::all();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["--out", dir] => {
            let dir = PathBuf::from(dir);
            for page in &pages {
                let folder = dir.join(format!("man{}", page.section));
                let path = folder.join(page.file_name());
                if let Err(error) =
                    std::fs::create_dir_all(&folder).and_then(|()| std::fs::write(&path, &page.roff))
                {
                    eprintln!("lava-man: {}: {error}", path.display());
                    return ExitCode::FAILURE;
                }
            }
            ExitCode::SUCCESS
        }
        ["--list"] => {
            for page in &pages {
                println!("{} {}", page.section, page.name);
            }
            ExitCode::SUCCESS
        }
        ["-h" | "--help"] => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        [name] if !name.starts_with('-') => match pages.iter().find(|page| page.name == name) {
            Some(page) => {
                print!("{}", page.roff);
                ExitCode::SUCCESS
            }
            None => {
                eprintln!("lava-man: no page for {name}");
                ExitCode::FAILURE
            }
        },
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}
