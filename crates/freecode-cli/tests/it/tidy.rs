//! House rules checked over the whole workspace: every Rust file opens with a `//!` doc comment
//! saying what it is for; no front end reaches into another; the operations table of
//! ARCHITECTURE.md is the code.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "target") {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn every_module_starts_with_a_doc_comment() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    rust_files(&crates, &mut files);
    assert!(
        files.len() > 10,
        "found only {} files under {}",
        files.len(),
        crates.display()
    );
    let missing: Vec<_> = files
        .iter()
        .filter(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            !text.trim_start().starts_with("//!")
        })
        .collect();
    assert!(
        missing.is_empty(),
        "files without a leading //! comment: {missing:#?}"
    );
}

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

/// The Rust files under `dir`, each with its text.
fn sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    rust_files(dir, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = read(&p);
            (p, text)
        })
        .collect()
}

/// No front end reaches into another: the JSON-RPC server names no CLI command, the MCP server
/// and the web viewer name neither each other nor the CLI, and no CLI command names the
/// JSON-RPC server. (`freecode-ops/tests/deps.rs` holds the crates' links to the same rule.)
#[test]
fn no_front_end_names_another() {
    let crates = root().join("crates");
    let cli = crates.join("freecode-cli/src");
    let rules: [(PathBuf, &[&str]); 4] = [
        (
            cli.join("commands/serve"),
            &[
                "crate::commands",
                "freecode_mcp",
                "freecode_ui",
                "crate::trace_render",
            ],
        ),
        (
            crates.join("freecode-mcp/src"),
            &["freecode_ui", "freecode_cli", "freecode_agent"],
        ),
        (
            crates.join("freecode-ui/src"),
            &["freecode_mcp", "freecode_cli", "freecode_agent"],
        ),
        (cli.join("commands"), &["commands::serve", "serve::"]),
    ];
    let mut seen = 0;
    for (dir, forbidden) in rules {
        for (path, text) in sources(&dir) {
            // The CLI's commands may not name the JSON-RPC server, which is one of them.
            if dir.ends_with("commands") && path.starts_with(cli.join("commands/serve")) {
                continue;
            }
            seen += 1;
            for (n, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                for f in forbidden {
                    assert!(
                        !code.contains(f),
                        "{}:{}: a front end names another ({f}): {line}",
                        path.display(),
                        n + 1
                    );
                }
            }
        }
    }
    assert!(seen > 10, "only {seen} files looked at");
}

/// One row of the operations table of ARCHITECTURE.md.
struct Row {
    operation: String,
    ops: Vec<String>,
    cli: Vec<String>,
    rpc: Vec<String>,
    mcp: Vec<String>,
    ui: Vec<String>,
}

/// The cells of a column: each backticked entry (none for `—`).
fn entries(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(|s| s.trim().to_owned())
        .collect()
}

fn operations_table() -> Vec<Row> {
    let text = read(&root().join("ARCHITECTURE.md"));
    let (_, rest) = text
        .split_once("<!-- operations -->")
        .expect("ARCHITECTURE.md has an operations table");
    let (table, _) = rest.split_once("<!-- /operations -->").expect("its end");
    let rows: Vec<Row> = table
        .lines()
        .filter(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            let cells: Vec<&str> = l.trim().trim_matches('|').split('|').collect();
            assert_eq!(cells.len(), 6, "six columns: {l}");
            Row {
                operation: cells[0].trim().to_owned(),
                ops: entries(cells[1]),
                cli: entries(cells[2]),
                rpc: entries(cells[3]),
                mcp: entries(cells[4]),
                ui: entries(cells[5]),
            }
        })
        .collect();
    assert!(rows.len() > 20, "{} rows", rows.len());
    rows
}

/// The child module a `pub use child::…;` line of `text` re-exports `name` from, if any.
fn reexported_from<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("pub use ")?.strip_suffix(';')?;
        let (child, names) = rest.split_once("::")?;
        let names = names.trim_start_matches('{').trim_end_matches('}');
        names.split(',').any(|n| n.trim() == name).then_some(child)
    })
}

/// `freecode_agent::module::[Type::]function` or `module::[Type::]function` (of
/// `freecode-ops`) is a public function of that module; `module::child::function` names a
/// function of the child module `src/module/child.rs`, when there is one.
fn assert_function(path: &str, operation: &str) {
    let (krate, rest) = match path.strip_prefix("freecode_agent::") {
        Some(rest) => ("freecode-agent", rest),
        None => ("freecode-ops", path),
    };
    let mut parts: Vec<&str> = rest.split("::").collect();
    assert!(parts.len() >= 2, "{operation}: {path} names no module");
    let src = root().join("crates").join(krate).join("src");
    let mut file = src.join(format!("{}.rs", parts[0]));
    if !file.is_file() {
        // A module that is a directory.
        file = src.join(parts[0]).join("mod.rs");
    }
    if parts.len() == 3 {
        let child = src.join(parts[0]).join(format!("{}.rs", parts[1]));
        if child.is_file() {
            file = child;
            parts.remove(0);
        }
    }
    let mut text = read(&file);
    let function = parts[parts.len() - 1];
    // A function re-exported from a child module (`pub use child::{…, function, …};`) is
    // that child's.
    if parts.len() == 2
        && let Some(child) = reexported_from(&text, function)
    {
        file = src.join(parts[0]).join(format!("{child}.rs"));
        text = read(&file);
    }
    assert!(
        text.contains(&format!("pub fn {function}("))
            || text.contains(&format!("pub fn {function}<")),
        "{operation}: no `pub fn {function}` in {}",
        file.display()
    );
    if parts.len() == 3 {
        assert!(
            text.contains(&format!("impl {}", parts[1])),
            "{operation}: no `impl {}` in {}",
            parts[1],
            file.display()
        );
    }
}

fn freecode(args: &[&str]) -> std::process::Output {
    let home = tempfile::tempdir().unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_freecode"))
        .args(args)
        .env("FREECODE_HOME", home.path())
        .output()
        .unwrap()
}

/// The subcommands a `--help` lists (under "Commands:"), `help` left out.
fn subcommands(path: &[&str]) -> Vec<String> {
    let mut args = path.to_vec();
    args.push("--help");
    let out = freecode(&args);
    assert!(out.status.success(), "freecode {args:?}");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let Some((_, rest)) = text.split_once("Commands:\n") else {
        return Vec::new();
    };
    rest.lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

/// Every method `rpc.discover` lists.
fn rpc_methods() -> Vec<String> {
    use std::io::Write;
    let home = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_freecode"))
        .arg("serve")
        .env("FREECODE_HOME", home.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"rpc.discover\"}\n")
        .unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let reply: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    reply["result"]["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_owned())
        .filter(|m| m != "rpc.discover")
        .collect()
}

/// The quoted strings of `text` that follow `marker` (`name = "…"`, `.route("…"`).
fn quoted_after(text: &str, marker: &str) -> Vec<String> {
    text.split(marker)
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_owned)
        .collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

/// The operations table of ARCHITECTURE.md is the code: each function it names exists, each
/// CLI command runs (`--help`), and the JSON-RPC methods, MCP tools, UI routes and CLI commands
/// that exist are all in it.
#[test]
fn the_operations_table_is_the_code() {
    let rows = operations_table();
    for r in &rows {
        assert!(!r.ops.is_empty(), "{}: no function", r.operation);
        for f in &r.ops {
            assert_function(f, &r.operation);
        }
        for c in &r.cli {
            let words: Vec<&str> = c.split_whitespace().collect();
            let command: Vec<&str> = words
                .iter()
                .copied()
                .take_while(|w| !w.starts_with("--"))
                .collect();
            let mut args = command.clone();
            args.push("--help");
            let out = freecode(&args);
            assert!(
                out.status.success(),
                "{}: `freecode {c}` does not run",
                r.operation
            );
            let help = String::from_utf8_lossy(&out.stdout);
            for flag in words.iter().filter(|w| w.starts_with("--")) {
                assert!(
                    help.contains(flag),
                    "{}: `freecode {c}`: no {flag}",
                    r.operation
                );
            }
        }
    }
    let column = |f: fn(&Row) -> &Vec<String>| {
        sorted(rows.iter().flat_map(|r| f(r).iter().cloned()).collect())
    };

    // Every JSON-RPC method, MCP tool and UI route there is, and nothing else.
    assert_eq!(
        column(|r| &r.rpc),
        sorted(rpc_methods()),
        "JSON-RPC methods"
    );
    let mcp = read(&root().join("crates/freecode-mcp/src/lib.rs"));
    let tools = quoted_after(&mcp, "#[tool(\n        name = \"");
    assert_eq!(tools.len(), 6, "{tools:?}");
    assert_eq!(column(|r| &r.mcp), sorted(tools), "MCP tools");
    let routes: Vec<String> = sources(&root().join("crates/freecode-ui/src"))
        .iter()
        .flat_map(|(_, text)| quoted_after(text, ".route(\""))
        .filter(|r| !r.starts_with("/assets/"))
        .collect();
    assert_eq!(column(|r| &r.ui), sorted(routes), "UI routes");

    // Every CLI command that is an operation (the front ends and the tools around them are
    // not: they run the servers, print the shell's files or run the tour).
    let not_operations = [
        "serve",
        "mcp",
        "ui",
        "sync serve",
        "demo",
        "completions",
        "man",
    ];
    let mut commands = Vec::new();
    for top in subcommands(&[]) {
        if not_operations.contains(&top.as_str()) {
            continue;
        }
        let subs = subcommands(&[top.as_str()]);
        if subs.is_empty() {
            commands.push(top);
        } else {
            commands.extend(
                subs.into_iter()
                    .map(|s| format!("{top} {s}"))
                    .filter(|c| !not_operations.contains(&c.as_str())),
            );
        }
    }
    let listed: Vec<String> = column(|r| &r.cli)
        .into_iter()
        .map(|c| {
            c.split_whitespace()
                .take_while(|w| !w.starts_with("--"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    for c in &commands {
        assert!(
            listed.contains(c),
            "`freecode {c}` is not in the operations table"
        );
    }
}

/// The module path of the source file `file` of a crate whose sources are under `src`
/// (`server/rules/quota.rs` is `["server", "rules", "quota"]`; `lib.rs` is `[]`).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts
        .last()
        .is_some_and(|l| l == "mod" || l == "lib" || l == "main")
    {
        parts.pop();
    }
    parts
}

/// The code of a source file without its comments and its `#[cfg(test)]` tests (a test may
/// name any module: it is not a dependency of the crate).
fn code_of(text: &str) -> String {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    text.lines()
        .map(|l| match l.find("//") {
            Some(at) => &l[..at],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path a file names through `crate::`, `super::` or `self::`, as the module path it
/// points into (a `use crate::{a, b::c}` group names `a` and `b`).
fn named_paths(module: &[String], code: &str) -> Vec<Vec<String>> {
    let bytes = code.as_bytes();
    let ident = |at: usize| -> &str {
        let end = code[at..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(code.len(), |n| at + n);
        &code[at..end]
    };
    let mut out = Vec::new();
    let mut at = 0;
    while at < code.len() {
        let start = at;
        let word = ident(at);
        if word.is_empty() {
            at += code[at..].chars().next().map_or(1, char::len_utf8);
            continue;
        }
        at += word.len();
        let preceded = start > 0 && {
            let b = bytes[start - 1];
            b.is_ascii_alphanumeric() || b == b'_' || b == b':'
        };
        if preceded || !matches!(word, "crate" | "super" | "self") {
            continue;
        }
        // The base: `crate` is the root; each `super` a step up; `self` here.
        let mut base: Vec<String> = if word == "crate" {
            Vec::new()
        } else {
            module.to_vec()
        };
        if word == "super" {
            base.pop();
        }
        let mut p = at;
        let mut names = Vec::new();
        while code[p..].starts_with("::") {
            p += 2;
            if code[p..].starts_with('{') {
                // A group: the first segment of each member, at its top level.
                let mut depth = 0usize;
                let mut member_start = true;
                for (i, c) in code[p..].char_indices() {
                    match c {
                        '{' => {
                            depth += 1;
                            member_start = depth == 1;
                        }
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                p += i + 1;
                                break;
                            }
                        }
                        ',' if depth == 1 => member_start = true,
                        c if member_start
                            && depth == 1
                            && (c.is_ascii_alphabetic() || c == '_') =>
                        {
                            member_start = false;
                            names.push(ident(p + i).to_owned());
                        }
                        _ => {}
                    }
                }
                break;
            }
            let seg = ident(p);
            if seg == "super" {
                base.pop();
                p += seg.len();
                continue;
            }
            if !seg.is_empty() {
                names.push(seg.to_owned());
            }
            break;
        }
        at = p.max(at);
        for name in names {
            let mut target = base.clone();
            target.push(name);
            out.push(target);
        }
    }
    out
}

/// The circles among the modules of the crate whose sources are under `src`: for every module
/// with children, an edge from child A to child B when any file in A's subtree names a path
/// into B's; each circle as its modules, and for each edge the files that make it.
fn module_circles(src: &Path) -> Vec<String> {
    use std::collections::{BTreeMap, BTreeSet};
    // A module's tests (`tests.rs` beside it) are not a dependency of the crate.
    let files: Vec<(PathBuf, String)> = sources(src)
        .into_iter()
        .filter(|(p, _)| module_path(src, p).last().is_none_or(|m| m != "tests"))
        .collect();
    let modules: BTreeSet<Vec<String>> = files.iter().map(|(p, _)| module_path(src, p)).collect();
    let mut edges: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (path, text) in &files {
        let from = module_path(src, path);
        for mut target in named_paths(&from, &code_of(text)) {
            while !target.is_empty() && !modules.contains(&target) {
                target.pop();
            }
            let common = from.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common < from.len() && common < target.len() {
                edges
                    .entry(from[..=common].join("::"))
                    .or_default()
                    .entry(target[..=common].join("::"))
                    .or_default()
                    .insert(path.strip_prefix(src).unwrap_or(path).display().to_string());
            }
        }
    }
    // Tarjan's strongly connected components; each of more than one module is a circle.
    struct Walk<'a> {
        edges: &'a BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        circles: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a str) {
        let n = w.index.len();
        w.index.insert(v, n);
        w.low.insert(v, n);
        w.stack.push(v);
        let next: Vec<&'a str> = w
            .edges
            .get(v)
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default();
        for u in next {
            if !w.index.contains_key(u) {
                visit(w, u);
                let l = w.low[u].min(w.low[v]);
                w.low.insert(v, l);
            } else if w.stack.contains(&u) {
                let l = w.index[u].min(w.low[v]);
                w.low.insert(v, l);
            }
        }
        if w.low[v] == w.index[v] {
            let mut circle = Vec::new();
            while let Some(u) = w.stack.pop() {
                circle.push(u);
                if u == v {
                    break;
                }
            }
            if circle.len() > 1 {
                w.circles.push(circle);
            }
        }
    }
    let mut w = Walk {
        edges: &edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        circles: Vec::new(),
    };
    for v in edges.keys() {
        if !w.index.contains_key(v.as_str()) {
            visit(&mut w, v);
        }
    }
    w.circles
        .iter()
        .map(|circle| {
            let mut s = format!("{}: {}", src.display(), circle.join(", "));
            for a in circle {
                for b in circle {
                    if let Some(files) = edges.get(*a).and_then(|m| m.get(*b)) {
                        s.push_str(&format!("\n  {a} -> {b} in {files:?}"));
                    }
                }
            }
            s
        })
        .collect()
}

/// No module of a library crate names a sibling that names it back, directly or round a
/// longer circle: each crate's modules are layered, so each can be read (and changed) with
/// only what is below it in mind. A parent and its own children may name each other (a
/// `mod.rs` holds what its children share); the binary's `cli` and `commands` are its top.
#[test]
fn no_module_circles() {
    let crates = root().join("crates");
    let mut circles = Vec::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(&crates).unwrap().flatten() {
        let src = entry.path().join("src");
        if entry.file_name() == "freecode-cli" || !src.join("lib.rs").is_file() {
            continue;
        }
        checked += 1;
        circles.extend(module_circles(&src));
    }
    assert!(checked >= 10, "checked only {checked} crates");
    assert!(
        circles.is_empty(),
        "module circles:\n{}",
        circles.join("\n")
    );
}

/// The check itself finds a circle, through `crate::`, `super::` and a `use` group, and does
/// not call a parent naming its child one.
#[test]
fn a_module_circle_is_found() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path();
    let write = |rel: &str, text: &str| {
        let p = src.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write(
        "lib.rs",
        "//! root\nmod a;\nmod b;\nmod c;\nuse crate::a::X;\n",
    );
    write("a.rs", "//! a\nuse crate::{c::Y, b};\n");
    write("b.rs", "//! b\npub fn f() {}\n");
    write("c/mod.rs", "//! c\nmod d;\npub struct Y;\n");
    write(
        "c/d.rs",
        "//! d\n// crate::b is only a comment\nuse super::Y;\n\n#[cfg(test)]\nmod tests {\n    use crate::a;\n}\n",
    );
    write("c/tests.rs", "//! c's tests\nuse crate::a::X;\n");
    assert!(module_circles(src).is_empty(), "{:?}", module_circles(src));
    write("c/d.rs", "//! d\nfn g() { super::super::a::f(); }\n");
    let found = module_circles(src);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("a -> c") && found[0].contains("c -> a"),
        "{found:?}"
    );
}

/// Every Rust file of the workspace fits in a reader's head: at most 1,800 lines (a larger
/// module is split along its seams, its tests in a sibling `tests.rs`); home sync's, where the
/// next rules land, at most 900 each.
#[test]
fn no_source_file_is_past_what_a_person_reads() {
    let crates = root().join("crates");
    let mut files = Vec::new();
    rust_files(&crates, &mut files);
    assert!(files.len() > 100, "found only {} files", files.len());
    let sync = crates.join("freecode-ops/src/home_sync");
    let long: Vec<String> = files
        .iter()
        .filter_map(|p| {
            let lines = read(p).lines().count();
            let cap = if p.starts_with(&sync) { 900 } else { 1800 };
            (lines > cap).then(|| format!("{} ({lines} lines, at most {cap})", p.display()))
        })
        .collect();
    assert!(long.is_empty(), "files past their size: {long:#?}");
}
