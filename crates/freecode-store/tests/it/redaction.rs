//! A user's own redaction rules (`redact.toml` in the home, gitleaks' format) merged over the
//! built-in ones: a rule of theirs catches their own secret, an allowlist of theirs keeps a
//! value, a built-in rule can be left out, and a file that cannot be used stops the export with
//! its line, writing nothing.

use std::io::Write as _;

use freecode_core::message::Role;
use freecode_store::share::{ExportOptions, export_bundle};

use crate::support::{TestHome, text_msg};

fn with_message(h: &TestHome, text: &str) -> freecode_core::SessionId {
    let id = h.create("/p");
    let mut w = h.store.writer(&id).unwrap();
    w.append(&text_msg("m1", Role::User, text)).unwrap();
    drop(w);
    id
}

fn exported(h: &TestHome, id: &freecode_core::SessionId) -> (String, Vec<String>) {
    let b = export_bundle(&h.store, id, &ExportOptions::default()).unwrap();
    let text = b.messages[0].parts[0].content.clone().unwrap_or_default();
    (text, b.redactions.iter().map(|r| r.kind.clone()).collect())
}

/// Each `(file, line, what)`: with that `redact.toml` the export of `id` stops, naming the
/// file's line and `what` is wrong.
fn refused(h: &TestHome, id: &freecode_core::SessionId, cases: &[(&str, usize, &str)]) {
    for (toml, line, what) in cases {
        write_rules(h, toml);
        let err = export_bundle(&h.store, id, &ExportOptions::default()).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("redact.toml:{line}: invalid redact.toml")) && msg.contains(what),
            "{toml:?}: {msg}"
        );
    }
}

fn write_rules(h: &TestHome, toml: &str) {
    let path = h.root().join("redact.toml");
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(toml.as_bytes()).unwrap();
}

#[test]
fn a_users_rule_catches_their_own_secret_format() {
    let h = TestHome::new();
    let secret = "acme_live_7Hq2LmX9pQ4rT8vW";
    let id = with_message(&h, &format!("the deploy key is {secret} for now"));
    // The built-in rules do not know the format.
    let (text, _) = exported(&h, &id);
    assert!(text.contains(secret), "{text}");
    write_rules(
        &h,
        "# our internal deploy keys\n[[rules]]\nid = \"acme-deploy-key\"\n\
         regex = '''\\bacme_live_[A-Za-z0-9]{16}\\b'''\nkeywords = [\"acme_live_\"]\n",
    );
    let (text, kinds) = exported(&h, &id);
    assert!(!text.contains(secret), "{text}");
    assert!(text.contains("[REDACTED:acme-deploy-key]"), "{text}");
    assert_eq!(kinds, ["acme-deploy-key"]);
}

#[test]
fn a_users_allowlist_keeps_a_value_and_no_built_in_rule_can_be_taken_away() {
    let h = TestHome::new();
    let token = "ghp_Zq8rT1vXw0yB3nC5mD7fG9hJ2kL4pQ6sU8wA";
    let id = with_message(&h, &format!("CI uses {token} from the vault"));
    let (text, kinds) = exported(&h, &id);
    assert!(
        !text.contains(token) && kinds.contains(&"github-pat".to_owned()),
        "{text}"
    );
    // Their allowlist (a known test token) keeps it, whichever rule found it.
    write_rules(
        &h,
        "[[allowlists]]\ndescription = \"our fixture token\"\nregexes = ['''^ghp_Zq8rT1vXw0yB3nC5''']\n",
    );
    let (text, _) = exported(&h, &id);
    assert!(text.contains(token), "{text}");
    // A user's file only adds: leaving out, replacing or loosening a built-in rule is refused
    // with its line, and nothing is exported.
    refused(
        &h,
        &id,
        &[
            (
                "# ours\n[extend]\ndisabledRules = [\"github-pat\"]\n",
                3,
                "disabledRules",
            ),
            ("[extend]\nuseDefault = false\n", 2, "useDefault"),
            (
                "[[rules]]\nid = \"github-pat\"\nregex = '''ghp_nothing_real'''\n",
                2,
                "built-in rule's id",
            ),
            (
                "[[rules]]\nid = \"github-pat\"\nentropy = 7.5\n",
                2,
                "entropy",
            ),
        ],
    );
    // Adding keywords to a built-in rule is adding.
    write_rules(
        &h,
        "[[rules]]\nid = \"github-pat\"\nkeywords = [\"jeton\"]\n",
    );
    let (text, kinds) = exported(&h, &id);
    assert!(!text.contains(token) && kinds.contains(&"github-pat".to_owned()));
}

#[test]
fn an_unusable_rule_file_stops_the_export_and_names_its_line() {
    let h = TestHome::new();
    let id = with_message(&h, "nothing secret");
    refused(
        &h,
        &id,
        &[
            (
                "[[rules]]\nid = \"x\"\nregex = '''(unclosed'''\n",
                3,
                "regex",
            ),
            ("title = \"mine\"\n\n[[rules]\nid = \"x\"\n", 3, ""),
            (
                "[[rules]]\nid = \"bad id!\"\nregex = '''x'''\n",
                2,
                "rule id",
            ),
            (
                "[[rules]]\nid = \"x\"\nregex = '''a'''\nsecretGroup = 3\n",
                3,
                "secretGroup",
            ),
            // A rule that can match nothing at all would stand where secrets are and hide them.
            (
                "# mine\n[[rules]]\nid = \"x-star\"\nregex = '''x*'''\n",
                4,
                "matches the empty string",
            ),
            (
                "[[rules]]\nid = \"opt\"\nregex = '''(?:tok_[a-z0-9]{8})?'''\n",
                3,
                "matches the empty string",
            ),
            // Allowlist entries that keep everything, or most secret shapes, switch redaction off.
            (
                "[[allowlists]]\ndescription = \"all\"\nregexes = ['''.*''']\n",
                3,
                "keeps everything",
            ),
            (
                "[[allowlists]]\nregexes = [\n  '''^ghp_0123''',\n  '''[a-z0-9]''',\n]\n",
                4,
                "secret-shaped test strings",
            ),
            (
                "[[rules]]\nid = \"github-pat\"\n[[rules.allowlists]]\nregexes = ['''^''']\n",
                4,
                "keeps everything",
            ),
        ],
    );
    // A good file again: the export works (the unusable one was never cached).
    write_rules(&h, "[[allowlists]]\nstopwords = [\"fixture\"]\n");
    export_bundle(&h.store, &id, &ExportOptions::default()).unwrap();
}

#[test]
fn a_users_allowlist_keeps_what_the_own_detectors_took_for_a_secret() {
    let h = TestHome::new();
    // A build id that looks random to the random-token detector, and a real assignment.
    let build = "Qm9vdFN0cmFwX3YyLjEuMC1yYzQtZ2l0LWE5ZjNjMmQ";
    let id = with_message(
        &h,
        &format!("artefact {build} publié; DB_PASSWORD=hunter2hunter2"),
    );
    let (text, kinds) = exported(&h, &id);
    assert!(!text.contains(build), "{text}");
    assert!(kinds.contains(&"random-token".to_owned()), "{kinds:?}");
    // Their build ids kept by an allowlist anchored to them (leaving the detector out is
    // refused: a user's file only adds).
    write_rules(
        &h,
        "[[allowlists]]\ndescription = \"our build ids\"\nregexes = ['''^Qm9vdFN0cmFw''']\n",
    );
    let (text, kinds) = exported(&h, &id);
    assert!(text.contains(build), "{text}");
    assert!(
        !text.contains("hunter2hunter2"),
        "the other detectors still run: {text}"
    );
    assert_eq!(kinds, ["secret-assignment"]);
}

#[test]
fn a_users_allowlist_on_the_generic_rule_keeps_what_its_match_names() {
    let h = TestHome::new();
    // A fingerprint under a key name the assignment detector takes for a secret's.
    let print = "Xk7Qp2Lm9Rt4Vw8Yz3Bn6Cd1Fg5Hj0Ks";
    let token = "Pq8Wm3Zx6Lk1Nv4Rt9Bs2Hd7Gf5Jc0Ya";
    let id = with_message(
        &h,
        &format!("deploy_token_fingerprint = \"{print}\"; deploy_token = \"{token}\""),
    );
    let (text, _) = exported(&h, &id);
    assert!(!text.contains(print), "{text}");
    // gitleaks' generic rule is left to freecode's own detectors, but an allowlist added to it
    // still judges what they find, by the whole match (`regexTarget = "match"`).
    write_rules(
        &h,
        "[[rules]]\nid = \"generic-api-key\"\n[[rules.allowlists]]\nregexTarget = \"match\"\n\
         regexes = ['''(?i)token[_.-]?fingerprint''']\n",
    );
    let (text, kinds) = exported(&h, &id);
    assert!(
        text.contains(print) && !text.contains(token),
        "the fingerprint stays, the token goes: {text}"
    );
    assert_eq!(kinds, ["secret-assignment"]);
}

/// A file's allowlists and stopwords are judged together, against secret-shaped lines made
/// from the built-in rules' own regexes: entries that each keep part, together keep most, and
/// are refused with their lines; so are short stopwords and a line-target regex of ordinary
/// punctuation. Allowlists anchored to what they mean pass.
#[test]
fn allowlists_are_judged_together_and_short_stopwords_refused() {
    let h = TestHome::new();
    let token = "ghp_Zq8rT1vXw0yB3nC5mD7fG9hJ2kL4pQ6sU8wA";
    let id = with_message(&h, &format!("the CI token is {token} — ne pas publier"));
    refused(
        &h,
        &id,
        &[
            (
                "[[allowlists]]\nregexes = ['''^[gAsx]''', '''^[^gAsx]''']\n",
                2,
                "together keep",
            ),
            (
                "[[allowlists]]\nregexes = ['''^[a-f]''']\n[[allowlists]]\nregexes = ['''^[g-r]''']\n[[allowlists]]\nregexes = ['''^[s-z]''']\n[[allowlists]]\nregexes = ['''^[^a-z]''']\n",
                2,
                "allowlist lines 2, 4, 6, 8",
            ),
            (
                "[[allowlists]]\nregexTarget = 'line'\nregexes = ['''[ :=\"]''']\n",
                2,
                "together keep",
            ),
            ("[[allowlists]]\nstopwords = ['e']\n", 2, "shorter than 3"),
            (
                "[[allowlists]]\nstopwords = ['fixture',\n  '7']\n",
                3,
                "shorter than 3",
            ),
            (
                "[[rules]]\nid = \"github-pat\"\n[[rules.allowlists]]\nstopwords = ['zz']\n",
                4,
                "shorter than 3",
            ),
        ],
    );
    // Anchored entries, whole-word stopwords and a line target that names its comment pass.
    write_rules(
        &h,
        "[[allowlists]]\ndescription = \"docs\"\nregexes = ['''^AKIAIOSFODNN7EXAMPLE$''', '''^ghp_0{36}$''']\nstopwords = ['fixture', 'example']\n\n[[allowlists]]\nregexTarget = 'line'\nregexes = ['''^# fake credentials for the tests''']\n",
    );
    let (text, kinds) = exported(&h, &id);
    assert!(!text.contains(token), "{text}");
    assert!(kinds.contains(&"github-pat".to_owned()), "{kinds:?}");
    // The verdict kept for the file that passed (judging costs half a second) is that file's
    // alone: a leaky file after it is judged, and refused.
    assert!(h.root().join("state/redact-judged").is_file());
    refused(
        &h,
        &id,
        &[(
            "[[allowlists]]\nregexes = ['''^[gAsx]''', '''^[^gAsx]''']\n",
            2,
            "together keep",
        )],
    );
}
