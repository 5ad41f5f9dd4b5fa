//! The layers' dependency rules, read from `cargo tree` (what a build of each crate alone
//! links, transitive dependencies included):
//!
//! - the operations (`freecode-ops`) and the agent (`freecode-agent`) link no front end's
//!   library: no clap, axum, rmcp, maud or indicatif (nor the share server's runtime: hyper,
//!   object_store, tokio), so a program that embeds freecode gets none of them;
//! - no front end links another front end: the MCP server and the web viewer never link each
//!   other, the CLI, or the agent they have no use for; the viewer takes the servers'
//!   connection layer (`freecode-http`) without the share server's blob store.

#![allow(clippy::expect_used)]

use std::process::Command;

/// The names of the packages a build of `package` alone links (normal dependencies).
fn linked(package: &str) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "--locked",
            "--offline",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .args(["--format", "{p}", "-p", package])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    names.sort();
    names.dedup();
    names
}

fn assert_links_none(package: &str, forbidden: &[&str]) {
    let names = linked(package);
    // The tree is real: the crate itself and what it is built on are in it.
    assert!(
        names.iter().any(|n| n == package) && names.iter().any(|n| n == "freecode-store"),
        "{package}: {names:?}"
    );
    let found: Vec<&String> = names
        .iter()
        .filter(|n| forbidden.contains(&n.as_str()))
        .collect();
    assert!(found.is_empty(), "{package} links {found:?}");
}

/// What only a front end (or the share server) may link.
const FRONT_END_LIBRARIES: &[&str] = &[
    "clap",
    "axum",
    "rmcp",
    "maud",
    "indicatif",
    "hyper",
    "object_store",
    "tokio",
];

#[test]
fn the_operations_and_the_agent_link_no_front_end_library() {
    assert_links_none("freecode-ops", FRONT_END_LIBRARIES);
    assert_links_none("freecode-agent", FRONT_END_LIBRARIES);
}

#[test]
fn no_front_end_links_another() {
    assert_links_none(
        "freecode-mcp",
        &[
            "freecode-ui",
            "freecode-cli",
            "freecode-agent",
            "axum",
            "maud",
        ],
    );
    // The viewer shares the share server's connection layer (`freecode-http`), not the
    // share server: no blob store comes with it.
    assert_links_none(
        "freecode-ui",
        &[
            "freecode-mcp",
            "freecode-cli",
            "freecode-agent",
            "rmcp",
            "object_store",
        ],
    );
    assert!(linked("freecode-ui").iter().any(|n| n == "freecode-http"));
}
