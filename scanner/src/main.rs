//! `scanfleet-scanner`: the scanner binary. `worker` runs a scanner node
//! (api -> Redis queue -> **node** -> event streams); `run` and `templates
//! check` use the template engine directly, as a standalone tool.
//!
//! # Layout
//! - `cli`: the command line (clap) and one module per subcommand: `run`,
//!   `templates` (`templates check`), `worker`.
//!
//! The binary only parses arguments, reads settings and prints: the node is
//! this crate's library (`scanfleet_scanner::node`), the engine
//! `scanfleet-engine`, the client `scanfleet-http`. Nothing imports the
//! binary.

mod cli;

use std::process::ExitCode;

use clap::Parser;

/// A scan allocates per request and per response (built requests, header
/// maps, variable maps, bodies) on tokio's workers and rayon's threads at
/// once; glibc's malloc spent about a fifth of a corpus run in its own
/// locking and consolidation, mimalloc's per-thread heaps do not.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    no_transparent_huge_pages();
    cli::run(cli::Cli::parse_from(cli::oob::nuclei_spellings(
        std::env::args_os(),
    )))
}

/// Turns transparent huge pages off for this process. mimalloc reserves
/// its arenas in large aligned regions; where the kernel's THP setting is
/// `always`, each touched region is backed by 2 MiB pages, which cost a
/// corpus run about 60 MiB of resident memory and more CPU (page clearing)
/// than they saved. The setting is checked at page-fault time, so memory
/// the allocator mapped before `main` is covered too. Failure (an old
/// kernel) only leaves the kernel's default in place.
fn no_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes plain integer arguments and touches
    // no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}
