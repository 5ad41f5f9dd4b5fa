//! Redaction of secrets in transcripts: a seeded corpus of realistic fake secrets, look-alikes
//! that must survive untouched, and the invariants of `scan`/`redact`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::borrow::Cow;

use freecode_core::redact::{
    Finding, PLACEHOLDER_PREFIX, Redactor, SecretKind, apply, placeholder, redact, scan,
};
use proptest::prelude::*;

// ---- fake secrets ------------------------------------------------------------------------------

const UPPER_B32: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const ALPHA: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const B64: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64URL: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const HEX: &str = "0123456789abcdef";

/// A small deterministic generator: the corpus is the same on every run, and no secret-shaped
/// literal sits in the source.
struct Fake(u64);

impl Fake {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn chars(&mut self, alphabet: &str, n: usize) -> String {
        let a = alphabet.as_bytes();
        (0..n)
            .map(|_| a[(self.next() % a.len() as u64) as usize] as char)
            .collect()
    }

    /// Random characters that contain a digit, an upper and a lower case letter, as far as
    /// the alphabet has them.
    fn mixed(&mut self, alphabet: &str, n: usize) -> String {
        let classes: [fn(&u8) -> bool; 3] = [
            u8::is_ascii_digit,
            u8::is_ascii_uppercase,
            u8::is_ascii_lowercase,
        ];
        loop {
            let s = self.chars(alphabet, n);
            let ok = classes
                .iter()
                .all(|c| !alphabet.bytes().any(|b| c(&b)) || s.bytes().any(|b| c(&b)));
            if ok {
                return s;
            }
        }
    }

    fn pem_body(&mut self, lines: usize) -> String {
        let mut out = String::new();
        for _ in 0..lines {
            out.push_str(&self.chars(B64, 64));
            out.push('\n');
        }
        out.push_str(&self.chars(B64, 20));
        out.push_str("==");
        out
    }

    fn jwt(&mut self) -> String {
        // `{"alg":"HS256","typ":"JWT"}` and a `{"sub":…}` payload, base64url.
        format!(
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOi{}.{}",
            self.chars(B64URL, 60),
            self.chars(B64URL, 43)
        )
    }
}

// ---- the corpus --------------------------------------------------------------------------------

struct Case {
    name: &'static str,
    text: String,
    /// Each secret with the id of the rule that names it.
    secrets: Vec<(&'static str, String)>,
    keep: Vec<&'static str>,
}

fn corpus() -> Vec<Case> {
    // The rule ids (gitleaks' own where one of its rules finds the secret).
    const AWS_ACCESS_KEY_ID: &str = "aws-access-token";
    const AWS_SECRET_ACCESS_KEY: &str = "aws-secret-access-key";
    const GITHUB_TOKEN: &str = "github-pat";
    const GITLAB_TOKEN: &str = "gitlab-pat";
    const SLACK_TOKEN: &str = "slack-bot-token";
    const SLACK_WEBHOOK: &str = "slack-webhook-url";
    const STRIPE_KEY: &str = "stripe-access-token";
    const GOOGLE_API_KEY: &str = "gcp-api-key";
    const NPM_TOKEN: &str = "npm-access-token";
    const PYPI_TOKEN: &str = "pypi-upload-token";
    const HUGGING_FACE_TOKEN: &str = "huggingface-access-token";
    const PRIVATE_KEY_BLOCK: &str = "private-key";
    const JWT_TOKEN: &str = "jwt";
    const BEARER_TOKEN: &str = "authorization-token";
    const BASIC_AUTH: &str = "basic-auth";
    const URL_CREDENTIALS: &str = "url-credentials";
    const CLI_FLAG: &str = "cli-flag";
    const ENV_ASSIGNMENT: &str = "secret-assignment";
    const AZURE_KEY: &str = "azure-key";
    const API_TOKEN: &str = "api-token";
    const RANDOM_TOKEN: &str = "random-token";
    let mut f = Fake(0x5eed_f00d_cafe_b0ba);
    let mut cases = Vec::new();

    // `cat .env`
    let pg_pw = format!("Pg-{}", f.mixed(ALNUM, 14));
    let openai = format!("sk-{}", f.mixed(ALNUM, 48));
    let stripe = format!("sk_live_{}", f.mixed(ALNUM, 99));
    let session = f.mixed(B64URL, 32);
    cases.push(Case {
        name: "cat .env",
        text: format!(
            "I'll check the environment file.\n\n$ cat .env\n\
             DATABASE_URL=postgres://app:{pg_pw}@db.internal:5432/app\n\
             OPENAI_API_KEY={openai}\n\
             export STRIPE_SECRET_KEY=\"{stripe}\"\n\
             SESSION_SECRET='{session}'\n\
             PASSWORD_MIN_LENGTH=8\n\
             DEBUG=true\n\nThe file defines four variables."
        ),
        secrets: vec![
            (URL_CREDENTIALS, pg_pw),
            // A fake without OpenAI's `T3BlbkFJ` marker: the assignment names it.
            (ENV_ASSIGNMENT, openai),
            (STRIPE_KEY, stripe),
            (ENV_ASSIGNMENT, session),
        ],
        keep: vec![
            "DATABASE_URL=postgres://app:",
            "@db.internal:5432/app",
            "OPENAI_API_KEY=",
            "export STRIPE_SECRET_KEY=\"",
            "SESSION_SECRET='",
            "PASSWORD_MIN_LENGTH=8",
            "DEBUG=true",
            "The file defines four variables.",
        ],
    });

    // `env | sort`
    let akia = format!("AKIA{}", f.chars(UPPER_B32, 16));
    let aws_secret = f.mixed(B64, 40);
    let session_token = format!("IQoJb3JpZ2luX2Vj{}", f.mixed(B64, 300));
    let ghp = format!("ghp_{}", f.mixed(ALNUM, 36));
    cases.push(Case {
        name: "env",
        text: format!(
            "$ env | sort\n\
             AWS_ACCESS_KEY_ID={akia}\n\
             AWS_SECRET_ACCESS_KEY={aws_secret}\n\
             AWS_SESSION_TOKEN={session_token}\n\
             GITHUB_TOKEN={ghp}\n\
             HOME=/home/dev\n\
             OLDPWD=/home/dev\n\
             PWD=/home/dev/project\n\
             SSH_AUTH_SOCK=/tmp/ssh-XXXXabc123/agent.1234\n\
             TOKENIZERS_PARALLELISM=false\n\
             GIT_ASKPASS=/usr/lib/git-core/git-gui--askpass\n"
        ),
        secrets: vec![
            (AWS_ACCESS_KEY_ID, akia),
            (AWS_SECRET_ACCESS_KEY, aws_secret),
            (ENV_ASSIGNMENT, session_token),
            (GITHUB_TOKEN, ghp),
        ],
        keep: vec![
            "AWS_ACCESS_KEY_ID=",
            "AWS_SECRET_ACCESS_KEY=",
            "AWS_SESSION_TOKEN=",
            "GITHUB_TOKEN=",
            "PWD=/home/dev/project",
            "SSH_AUTH_SOCK=/tmp/ssh-XXXXabc123/agent.1234",
            "TOKENIZERS_PARALLELISM=false",
        ],
    });

    // `cat ~/.aws/credentials`
    let asia = format!("ASIA{}", f.chars(UPPER_B32, 16));
    let aws_secret2 = f.mixed(B64, 40);
    cases.push(Case {
        name: "aws credentials",
        text: format!(
            "$ cat ~/.aws/credentials\n[default]\n\
             aws_access_key_id = {asia}\n\
             aws_secret_access_key = {aws_secret2}\n\
             region = eu-west-1\n"
        ),
        secrets: vec![
            (AWS_ACCESS_KEY_ID, asia),
            (AWS_SECRET_ACCESS_KEY, aws_secret2),
        ],
        keep: vec![
            "[default]",
            "aws_access_key_id = ",
            "aws_secret_access_key = ",
            "region = eu-west-1",
        ],
    });

    // `aws sts assume-role` JSON output
    let asia2 = format!("ASIA{}", f.chars(UPPER_B32, 16));
    let aws_secret3 = f.mixed(B64, 40);
    let sts_token = f.mixed(B64, 200);
    cases.push(Case {
        name: "aws sts json",
        text: format!(
            "{{\n    \"Credentials\": {{\n        \"AccessKeyId\": \"{asia2}\",\n        \
             \"SecretAccessKey\": \"{aws_secret3}\",\n        \"SessionToken\": \"{sts_token}\",\n        \
             \"Expiration\": \"2025-03-01T12:00:00Z\"\n    }}\n}}"
        ),
        secrets: vec![
            (AWS_ACCESS_KEY_ID, asia2),
            (AWS_SECRET_ACCESS_KEY, aws_secret3),
            (ENV_ASSIGNMENT, sts_token),
        ],
        keep: vec![
            "\"AccessKeyId\": \"",
            "\"SecretAccessKey\": \"",
            "\"SessionToken\": \"",
            "\"Expiration\": \"2025-03-01T12:00:00Z\"",
        ],
    });

    // `git remote -v`
    let glpat = format!("glpat-{}", f.mixed(B64URL, 20));
    let ghs = format!("ghs_{}", f.mixed(ALNUM, 36));
    let deploy_pw = format!("Tr0ub4dor{}", f.mixed(ALNUM, 6));
    cases.push(Case {
        name: "git remote -v",
        text: format!(
            "$ git remote -v\n\
             origin\thttps://oauth2:{glpat}@gitlab.com/acme/api.git (fetch)\n\
             origin\thttps://oauth2:{glpat}@gitlab.com/acme/api.git (push)\n\
             upstream\thttps://x-access-token:{ghs}@github.com/acme/api.git (fetch)\n\
             mirror\thttps://deploy:{deploy_pw}@git.example.com/acme/api.git (fetch)\n"
        ),
        secrets: vec![
            (GITLAB_TOKEN, glpat.clone()),
            (GITLAB_TOKEN, glpat),
            ("github-app-token", ghs),
            (URL_CREDENTIALS, deploy_pw),
        ],
        keep: vec![
            "origin\thttps://oauth2:",
            "@gitlab.com/acme/api.git (fetch)",
            "https://x-access-token:",
            "@github.com/acme/api.git",
            "https://deploy:",
        ],
    });

    // A classic OAuth token as the user of a clone URL.
    let hex_user = f.mixed(HEX, 40);
    cases.push(Case {
        name: "token as url user",
        text: format!(
            "$ git clone https://{hex_user}@github.com/acme/private.git\nCloning into 'private'..."
        ),
        secrets: vec![(URL_CREDENTIALS, hex_user)],
        keep: vec!["$ git clone https://", "@github.com/acme/private.git"],
    });

    // curl with a bearer token, a basic header and -u
    let opaque = f.mixed(B64URL, 40);
    let basic = f.mixed(B64, 28);
    let jenkins_pw = format!("{}!", f.mixed(ALNUM, 12));
    cases.push(Case {
        name: "curl",
        text: format!(
            "$ curl -sS https://api.example.com/v1/me -H \"Authorization: Bearer {opaque}\" -H 'Accept: application/json'\n\
             {{\"id\": 42, \"name\": \"dev\"}}\n\
             $ curl -H 'Authorization: Basic {basic}=' https://registry.example.com/v2/_catalog\n\
             $ curl -u admin:{jenkins_pw} https://jenkins.example.com/api/json\n"
        ),
        secrets: vec![
            ("curl-auth-header", opaque),
            ("curl-auth-header", format!("{basic}=")),
            (BASIC_AUTH, jenkins_pw),
        ],
        keep: vec![
            "-H \"Authorization: Bearer ",
            "-H 'Accept: application/json'",
            "Authorization: Basic ",
            "curl -u admin:",
            "https://jenkins.example.com/api/json",
        ],
    });

    // Anthropic and OpenAI keys in curl and Python
    let ant = format!(
        "sk-ant-api03-{}-{}AA",
        f.mixed(B64URL, 80),
        f.mixed(ALNUM, 10)
    );
    let proj = format!(
        "sk-proj-{}_{}T3BlbkFJ{}",
        f.mixed(ALNUM, 60),
        f.mixed(B64URL, 40),
        f.mixed(ALNUM, 40)
    );
    let svc = format!("sk-svcacct-{}", f.mixed(ALNUM, 70));
    cases.push(Case {
        name: "llm keys",
        text: format!(
            "$ curl https://api.anthropic.com/v1/messages -H \"x-api-key: {ant}\" -H \"anthropic-version: 2023-06-01\"\n\
             ```python\nclient = OpenAI(api_key=\"{proj}\")\nopenai.api_key = '{svc}'\n```\n"
        ),
        secrets: vec![
            ("curl-auth-header", ant),
            (ENV_ASSIGNMENT, proj),
            (ENV_ASSIGNMENT, svc),
        ],
        keep: vec![
            "-H \"x-api-key: ",
            "\"anthropic-version: 2023-06-01\"",
            "client = OpenAI(api_key=\"",
            "openai.api_key = '",
        ],
    });

    // An HTTP request as a proxy logs it: the header names the token.
    let opaque2 = f.mixed(B64URL, 40);
    cases.push(Case {
        name: "request log",
        text: format!(
            "GET /v1/me HTTP/1.1\nHost: api.internal\nAuthorization: Bearer {opaque2}\nAccept: */*\n"
        ),
        secrets: vec![(BEARER_TOKEN, opaque2)],
        keep: vec!["GET /v1/me HTTP/1.1", "Authorization: Bearer ", "Accept: */*"],
    });

    // A JSON settings file
    let gho = format!("gho_{}", f.mixed(ALNUM, 36));
    let aiza = format!("AIza{}", f.mixed(B64URL, 35));
    let xoxb = format!(
        "xoxb-{}-{}-{}",
        f.chars("0123456789", 12),
        f.chars("0123456789", 13),
        f.mixed(ALNUM, 24)
    );
    let hook = format!(
        "T{}/B{}/{}",
        f.mixed("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 8),
        f.mixed("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 10),
        f.mixed(ALNUM, 24)
    );
    let db_pw = format!("{}#{}", f.mixed(ALNUM, 10), f.mixed(ALNUM, 4));
    cases.push(Case {
        name: "settings.json",
        text: format!(
            "{{\n  \"github\": {{\"token\": \"{gho}\"}},\n  \"google\": {{\"apiKey\": \"{aiza}\"}},\n  \
             \"slack\": {{\"botToken\": \"{xoxb}\", \"webhook\": \"https://hooks.slack.com/services/{hook}\"}},\n  \
             \"db\": {{\"password\": \"{db_pw}\", \"passwordMinLength\": 12}},\n  \"max_tokens\": 4096\n}}"
        ),
        secrets: vec![
            ("github-oauth", gho),
            (GOOGLE_API_KEY, aiza),
            (SLACK_TOKEN, xoxb),
            (SLACK_WEBHOOK, format!("https://hooks.slack.com/services/{hook}")),
            (ENV_ASSIGNMENT, db_pw),
        ],
        keep: vec![
            "\"github\": {\"token\": \"",
            "\"apiKey\": \"",
            "\"botToken\": \"",
            "\"webhook\": \"",
            "\"password\": \"",
            "\"passwordMinLength\": 12",
            "\"max_tokens\": 4096",
        ],
    });

    // PEM files of several flavours
    for (name, label) in [
        ("pem rsa", "RSA PRIVATE KEY"),
        ("pem openssh", "OPENSSH PRIVATE KEY"),
        ("pem ec", "EC PRIVATE KEY"),
        ("pem encrypted", "ENCRYPTED PRIVATE KEY"),
        ("pem pgp", "PGP PRIVATE KEY BLOCK"),
    ] {
        let headers = if label == "RSA PRIVATE KEY" {
            "Proc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0123456789ABCDEF0123456789ABCDEF\n\n"
        } else if label.starts_with("PGP") {
            "Version: GnuPG v2\n\n"
        } else {
            ""
        };
        let block = format!(
            "-----BEGIN {label}-----\n{headers}{}\n-----END {label}-----",
            f.pem_body(12)
        );
        cases.push(Case {
            name,
            text: format!("$ cat ~/.ssh/deploy_key\n{block}\n$ ls -l ~/.ssh\ntotal 8\n"),
            secrets: vec![(PRIVATE_KEY_BLOCK, block)],
            keep: vec!["$ cat ~/.ssh/deploy_key\n", "\n$ ls -l ~/.ssh\ntotal 8\n"],
        });
    }

    // A key block whose END line was cut off by output truncation.
    let cut = format!("-----BEGIN PRIVATE KEY-----\n{}", f.pem_body(6));
    cases.push(Case {
        name: "pem truncated",
        text: format!("{cut}\n[... 40 more lines truncated]"),
        secrets: vec![(PRIVATE_KEY_BLOCK, cut)],
        keep: vec!["\n[... 40 more lines truncated]"],
    });

    // A GCP service account: the key block sits JSON-escaped inside a string.
    let gcp_block = format!(
        "-----BEGIN PRIVATE KEY-----\\n{}\\n-----END PRIVATE KEY-----",
        f.pem_body(8).replace('\n', "\\n")
    );
    let gcp_key_id = f.chars(HEX, 40);
    cases.push(Case {
        name: "gcp service account",
        text: format!(
            "{{\n  \"type\": \"service_account\",\n  \"project_id\": \"acme-prod\",\n  \
             \"private_key_id\": \"{gcp_key_id}\",\n  \"private_key\": \"{gcp_block}\\n\",\n  \
             \"client_email\": \"ci@acme-prod.iam.gserviceaccount.com\",\n  \"token_uri\": \"https://oauth2.googleapis.com/token\"\n}}"
        ),
        secrets: vec![(PRIVATE_KEY_BLOCK, gcp_block)],
        keep: vec![
            "\"private_key\": \"",
            "\"token_uri\": \"https://oauth2.googleapis.com/token\"",
            "\"client_email\": \"ci@acme-prod.iam.gserviceaccount.com\"",
        ],
    });

    // JWTs in prose and in a header
    let jwt1 = f.jwt();
    let jwt2 = f.jwt();
    cases.push(Case {
        name: "jwt",
        text: format!(
            "The login endpoint returned {jwt1} which expires in an hour.\n\
             Then: curl -H \"Authorization: Bearer {jwt2}\" http://localhost:8080/api/profile"
        ),
        secrets: vec![(JWT_TOKEN, jwt1), ("curl-auth-header", jwt2)],
        keep: vec![
            "The login endpoint returned ",
            " which expires in an hour.",
            "Authorization: Bearer ",
        ],
    });

    // Kubernetes secret and docker-compose YAML
    let k8s_pw = f.mixed(B64, 24);
    let k8s_api = f.mixed(ALNUM, 32);
    let pg = format!("{}-{}", f.mixed(ALPHA, 8), f.chars("0123456789", 4));
    let mysql = f.mixed(ALNUM, 16);
    cases.push(Case {
        name: "yaml",
        text: format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: api-credentials\ntype: Opaque\ndata:\n  \
             password: {k8s_pw}==\nstringData:\n  api-key: {k8s_api}\n---\nservices:\n  db:\n    environment:\n      \
             - POSTGRES_PASSWORD={pg}\n      MYSQL_ROOT_PASSWORD: \"{mysql}\"\n"
        ),
        secrets: vec![
            (ENV_ASSIGNMENT, format!("{k8s_pw}==")),
            (ENV_ASSIGNMENT, k8s_api),
            (ENV_ASSIGNMENT, pg),
            (ENV_ASSIGNMENT, mysql),
        ],
        keep: vec![
            "kind: Secret",
            "name: api-credentials",
            "  password: ",
            "  api-key: ",
            "- POSTGRES_PASSWORD=",
            "MYSQL_ROOT_PASSWORD: \"",
        ],
    });

    // Package registry credentials
    let npm = format!("npm_{}", f.mixed(ALNUM, 36));
    let pypi = format!("pypi-AgEIcHlwaS5vcmc{}", f.mixed(B64URL, 120));
    let hf = format!("hf_{}", f.mixed(ALPHA, 34));
    let cargo = format!("cio{}", f.mixed(ALNUM, 32));
    cases.push(Case {
        name: "registries",
        text: format!(
            "$ cat ~/.npmrc\n//registry.npmjs.org/:_authToken={npm}\n\
             $ cat ~/.pypirc\n[pypi]\nusername = __token__\npassword = {pypi}\n\
             $ huggingface-cli login --token {hf}\n\
             $ cat ~/.cargo/credentials.toml\n[registry]\ntoken = \"{cargo}\"\n"
        ),
        secrets: vec![
            (NPM_TOKEN, npm),
            (PYPI_TOKEN, pypi),
            (HUGGING_FACE_TOKEN, hf),
            (ENV_ASSIGNMENT, cargo),
        ],
        keep: vec![
            "//registry.npmjs.org/:_authToken=",
            "username = __token__",
            "password = ",
            "huggingface-cli login --token ",
            "[registry]\ntoken = \"",
        ],
    });

    // Azure and other providers' published formats, standing alone in prose
    let entra = format!("{}8Q~{}", f.mixed(ALNUM, 3), f.mixed(ALNUM, 34));
    let storage = format!("{}==", f.mixed(B64, 86));
    let twilio = format!("SK{}", f.mixed(HEX, 32));
    let sendgrid = format!("SG.{}.{}", f.mixed(B64URL, 22), f.mixed(B64URL, 43));
    let vault = format!("hvs.{}", f.mixed(B64URL, 95));
    let groq = format!("gsk_{}", f.mixed(ALNUM, 52));
    cases.push(Case {
        name: "providers",
        text: format!(
            "The app registration's client secret is {entra} and the storage account key              {storage} (both from the portal).
Also tried Twilio {twilio}, SendGrid {sendgrid},              the Vault token {vault} and Groq {groq} today.
"
        ),
        secrets: vec![
            ("azure-ad-client-secret", entra),
            (AZURE_KEY, storage),
            ("twilio-api-key", twilio),
            ("sendgrid-api-token", sendgrid),
            ("vault-service-token", vault),
            (API_TOKEN, groq),
        ],
        keep: vec![
            "The app registration's client secret is ",
            " and the storage account key ",
            "Also tried Twilio ",
            "the Vault token ",
        ],
    });

    // Shell history with exports and command-line flags
    let ant2 = format!("sk-ant-api03-{}", f.mixed(B64URL, 90));
    let dckr = format!("dckr_pat_{}", f.mixed(B64URL, 27));
    let pat = format!("github_pat_{}_{}", f.mixed(ALNUM, 22), f.mixed(ALNUM, 59));
    let mysql = f.mixed(ALNUM, 14);
    cases.push(Case {
        name: "shell history",
        text: format!(
            "$ history | tail -3\n  501  export ANTHROPIC_API_KEY=\"{ant2}\"\n  \
             502  docker login --username ci-bot --password {dckr} registry.example.com\n  \
             503  gh auth login --with-token <<< {pat}\n  \
             504  mysql -h db --password {mysql} app\n"
        ),
        // The Docker Hub token is a known format now (it was caught as the flag's value).
        secrets: vec![
            (ENV_ASSIGNMENT, ant2),
            (CLI_FLAG, dckr),
            ("github-fine-grained-pat", pat),
            (CLI_FLAG, mysql),
        ],
        keep: vec![
            "export ANTHROPIC_API_KEY=\"",
            "docker login --username ci-bot --password ",
            " registry.example.com",
            "gh auth login --with-token <<< ",
        ],
    });

    // Chat messages pasting keys
    let rk = format!("rk_live_{}", f.mixed(ALNUM, 40));
    let whsec = format!("whsec_{}", f.mixed(ALNUM, 32));
    let xapp = format!(
        "xapp-1-A{}-{}-{}",
        f.mixed("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 10),
        f.chars("0123456789", 13),
        f.mixed(HEX, 64)
    );
    let ghr = format!("ghr_{}", f.mixed(ALNUM, 76));
    let ghu = format!("ghu_{}", f.mixed(ALNUM, 36));
    cases.push(Case {
        name: "chat",
        text: format!(
            "User: I rotated the restricted key, the new one is {rk} and the webhook signing \
             secret is {whsec}.\nUser: socket mode app token: {xapp}\n\
             Assistant: Thanks. The refresh token {ghr} and user token ({ghu}) should not be shared."
        ),
        secrets: vec![
            (STRIPE_KEY, rk),
            // Named by the sentence: "the … secret is …".
            (ENV_ASSIGNMENT, whsec),
            ("slack-app-token", xapp),
            // gitleaks' refresh-token rule takes GitHub's 36 characters; the rest is random.
            ("github-refresh-token", ghr[..40].to_owned()),
            (RANDOM_TOKEN, ghr[40..].to_owned()),
            ("github-app-token", ghu),
        ],
        keep: vec![
            "User: I rotated the restricted key, the new one is ",
            " and the webhook signing secret is ",
            "User: socket mode app token: ",
            "Assistant: Thanks. The refresh token ",
            "should not be shared.",
        ],
    });

    // A transcript stored as JSON lines: newlines and quotes are escapes.
    let pw_jsonl = format!("hunter2-{}", f.mixed(ALNUM, 6));
    let tok_jsonl = f.mixed(B64URL, 30);
    cases.push(Case {
        name: "jsonl escaped",
        text: format!(
            "{{\"role\":\"tool\",\"content\":\"$ cat .env.local\\nPASSWORD={pw_jsonl}\\nAPI_TOKEN=\\\"{tok_jsonl}\\\"\\nPORT=3000\\n\"}}"
        ),
        secrets: vec![(ENV_ASSIGNMENT, pw_jsonl), (ENV_ASSIGNMENT, tok_jsonl)],
        keep: vec![
            "{\"role\":\"tool\",\"content\":\"$ cat .env.local\\nPASSWORD=",
            "\\nAPI_TOKEN=\\\"",
            "\\\"\\nPORT=3000\\n\"}",
        ],
    });

    // A JSON document JSON-escaped inside a transcript line.
    let nested_pw = format!("{}-{}", f.mixed(ALNUM, 10), f.mixed(ALNUM, 6));
    let nested_key = format!("sk-ant-api03-{}", f.mixed(B64URL, 60));
    cases.push(Case {
        name: "jsonl nested json",
        text: format!(
            "{{\"type\":\"tool_result\",\"content\":\"{{\\\"db\\\":{{\\\"user\\\":\\\"app\\\",\\\"password\\\":\\\"{nested_pw}\\\"}},\\\"anthropicApiKey\\\": \\\"{nested_key}\\\"}}\"}}"
        ),
        secrets: vec![(ENV_ASSIGNMENT, nested_pw), (ENV_ASSIGNMENT, nested_key)],
        keep: vec![
            "\\\"user\\\":\\\"app\\\"",
            "\\\"password\\\":\\\"",
            "\\\"anthropicApiKey\\\": \\\"",
        ],
    });

    // Source code with literal secrets
    let py_pw = format!("{}!{}", f.mixed(ALNUM, 9), f.chars("0123456789", 3));
    let rails = f.chars(HEX, 128);
    let legacy = format!("sk-{}", f.mixed(ALNUM, 48));
    cases.push(Case {
        name: "source code",
        text: format!(
            "```python\ndef connect(user: str, password: str = \"{py_pw}\") -> Connection:\n    ...\n```\n\
             ```yaml\nproduction:\n  secret_key_base: {rails}\n```\n\
             ```js\nconst openai = new OpenAI({{ apiKey: '{legacy}' }});\n```"
        ),
        secrets: vec![
            (ENV_ASSIGNMENT, py_pw),
            (ENV_ASSIGNMENT, rails),
            (ENV_ASSIGNMENT, legacy),
        ],
        keep: vec![
            "def connect(user: str, password: str = \"",
            "\") -> Connection:",
            "  secret_key_base: ",
            "const openai = new OpenAI({ apiKey: '",
        ],
    });

    // GitHub's `Authorization: token …` and a proxy header
    let ghp2 = format!("ghp_{}", f.mixed(ALNUM, 36));
    let proxy = f.mixed(B64, 32);
    cases.push(Case {
        name: "more headers",
        text: format!(
            "> GET /repos/acme/api HTTP/1.1\n> Authorization: token {ghp2}\n> Proxy-Authorization: Basic {proxy}\n> User-Agent: curl/8.5.0\n"
        ),
        secrets: vec![(GITHUB_TOKEN, ghp2), (BASIC_AUTH, proxy)],
        keep: vec![
            "> Authorization: token ",
            "> Proxy-Authorization: Basic ",
            "> User-Agent: curl/8.5.0",
        ],
    });

    // A Kubernetes Secret: every `data:` value, whatever its key, and a block value.
    let k8s_a = f.mixed(B64, 24);
    let k8s_b = format!("{}==", f.mixed(B64, 30));
    let k8s_c = format!("{}=", f.mixed(B64, 63));
    cases.push(Case {
        name: "kubernetes secret",
        text: format!(
            "$ kubectl get secret app -o yaml
apiVersion: v1
data:
  extra: {k8s_a}
               \"db.conf\": \"{k8s_b}\"
  .dockerconfigjson: |
    {k8s_c}
kind: Secret
             metadata:
  name: app
type: Opaque
"
        ),
        secrets: vec![
            (ENV_ASSIGNMENT, k8s_a),
            (ENV_ASSIGNMENT, k8s_b),
            (ENV_ASSIGNMENT, k8s_c),
        ],
        keep: vec![
            "  extra: ",
            "  \"db.conf\": \"",
            "kind: Secret",
            "  name: app",
        ],
    });

    // Context-named secrets: SonarQube's login, an AWS session token, a password with bracket
    // symbols, a connection string whose user is its password.
    let sonar = format!("squ{}", f.mixed(ALNUM, 37));
    let aws_session = f.mixed(B64, 300);
    let symbols = format!("x{{{}){}]", f.mixed(ALNUM, 6), f.mixed(ALNUM, 6));
    let same = f.mixed(ALNUM, 8);
    cases.push(Case {
        name: "context-named secrets",
        text: format!(
            "sonar.login={sonar}\n[default]\nsession: {aws_session}\nDB_PASS = {symbols},\n\
             MONGO_URL=mongodb://{same}:{same}@db:27017/app\n"
        ),
        secrets: vec![
            ("sonar-api-token", sonar),
            (ENV_ASSIGNMENT, aws_session),
            (ENV_ASSIGNMENT, symbols),
            (URL_CREDENTIALS, same.clone()),
            (URL_CREDENTIALS, same),
        ],
        keep: vec![
            "sonar.login=",
            "session: ",
            "DB_PASS = ",
            "MONGO_URL=mongodb://",
            "@db:27017/app",
        ],
    });

    // Provider formats known by structure or prefix.
    let key44 = f.mixed(ALNUM, 44);
    let gcp_refresh = format!("1//0{}", f.mixed(B64URL, 60));
    let twitter = format!("{}-{}", f.chars("0123456789", 19), f.mixed(ALNUM, 31));
    let gemini = format!("master-{}", f.mixed(ALNUM, 20));
    let maxmind = format!("{}_{}_mmk", f.mixed(ALNUM, 6), f.mixed(ALNUM, 29));
    cases.push(Case {
        name: "structured provider keys",
        text: format!(
            "IAM key {key44}; refresh {gcp_refresh}; twitter {twitter}; gemini {gemini}; \
             maxmind {maxmind}."
        ),
        secrets: vec![
            (API_TOKEN, key44),
            (API_TOKEN, gcp_refresh),
            (API_TOKEN, twitter),
            (API_TOKEN, gemini),
            (RANDOM_TOKEN, maxmind),
        ],
        keep: vec![
            "IAM key ",
            "; refresh ",
            "; twitter ",
            "; gemini ",
            "; maxmind ",
        ],
    });

    cases
}

fn secret_count(cases: &[Case]) -> usize {
    cases.iter().map(|c| c.secrets.len()).sum()
}

#[test]
fn the_corpus_is_large_and_covers_every_kind() {
    let cases = corpus();
    assert!(secret_count(&cases) >= 30, "{}", secret_count(&cases));
    // Every detector of the redactor's own is exercised (the rule set's rules have their own
    // tests, `gitleaks_rules.rs`).
    for kind in SecretKind::ALL {
        assert!(
            cases
                .iter()
                .any(|c| c.secrets.iter().any(|(k, _)| *k == kind.name())),
            "no corpus secret of kind {kind}"
        );
    }
}

#[test]
fn every_corpus_secret_is_caught_with_its_kind() {
    for case in corpus() {
        let findings = scan(&case.text);
        let mut got: Vec<(&str, &str)> = findings
            .iter()
            .map(|f| (f.kind.name(), &case.text[f.range()]))
            .collect();
        let mut want: Vec<(&str, &str)> =
            case.secrets.iter().map(|(k, s)| (*k, s.as_str())).collect();
        got.sort();
        want.sort();
        assert_eq!(got, want, "case {:?}:\n{}", case.name, case.text);
    }
}

#[test]
fn redacted_text_has_no_secret_bytes_but_keeps_the_rest() {
    for case in corpus() {
        let (out, findings) = redact(&case.text);
        assert!(matches!(out, Cow::Owned(_)), "{}", case.name);
        assert_eq!(findings.len(), case.secrets.len(), "{}", case.name);
        for (kind, secret) in &case.secrets {
            assert!(
                !out.contains(secret.as_str()),
                "case {:?} leaks a {kind}:\n{out}",
                case.name
            );
            // Not even a partial leak: no 12-byte window of the secret survives.
            if secret.len() >= 12 {
                for i in 0..=secret.len() - 12 {
                    let window = &secret[i..i + 12];
                    assert!(
                        !out.contains(window),
                        "case {:?} leaks {window:?} of a {kind}:\n{out}",
                        case.name
                    );
                }
            }
            assert!(
                out.contains(&format!("{PLACEHOLDER_PREFIX}{kind}]")),
                "{}",
                case.name
            );
        }
        for keep in &case.keep {
            assert!(
                out.contains(keep),
                "case {:?} lost {keep:?}:\n{out}",
                case.name
            );
        }
    }
}

#[test]
fn env_assignment_keeps_the_key_and_the_quotes() {
    let (out, findings) = redact("PASSWORD=hunter2\nexport API_KEY=\"abc123secret\"\n");
    assert_eq!(
        out,
        "PASSWORD=[REDACTED:secret-assignment]\nexport API_KEY=\"[REDACTED:secret-assignment]\"\n"
    );
    assert_eq!(
        findings[0],
        Finding {
            kind: SecretKind::EnvAssignment,
            start: 9,
            end: 16
        }
    );
    // JSON inside a JSON string inside a config value: the quotes escaped once and twice over.
    for text in [
        r#"{\"password\":\"hunter2hunter2\"}"#,
        r#"env = ["AUTH={\\\"auths\\\":{\\\"r.io\\\":{\\\"auth\\\":\\\"dXNlcjpodW50ZXIy\\\"}}}"]"#,
    ] {
        let (out, _) = redact(text);
        assert!(
            !out.contains("hunter2hunter2") && !out.contains("dXNlcjpodW50ZXIy"),
            "{out}"
        );
        assert!(out.contains("[REDACTED:secret-assignment]"), "{out}");
    }
}

#[test]
fn url_credentials_redact_only_the_password() {
    let (out, _) = redact("redis://default:s3cretPassw0rd@cache.internal:6379/0");
    assert_eq!(
        out,
        "redis://default:[REDACTED:url-credentials]@cache.internal:6379/0"
    );
}

#[test]
fn a_format_token_wins_over_the_assignment_it_sits_in() {
    let mut f = Fake(7);
    let ghp = format!("ghp_{}", f.mixed(ALNUM, 36));
    let text = format!("GITHUB_TOKEN={ghp}");
    let (out, findings) = redact(&text);
    assert_eq!(out, "GITHUB_TOKEN=[REDACTED:github-pat]");
    assert_eq!(findings.len(), 1);
}

// ---- look-alikes -------------------------------------------------------------------------------

fn look_alikes() -> Vec<String> {
    let mut f = Fake(0x1234_5678_9abc_def0);
    let image = f.chars(B64, 4000);
    let mut v: Vec<String> = [
        "sk-learn is the usual abbreviation for scikit-learn; sk-learn-intelex speeds it up.",
        "task-sk-1 failed; retrying task-sk-2 and task-sk-3",
        "commit 3f9a2c1e8b7d6f5a4c3b2a1908f7e6d5c4b3a291\nAuthor: Jane Doe <jane@example.com>",
        "request id 123e4567-e89b-12d3-a456-426614174000, trace 4bf92f3577b34da6a3ce929d0e0e4736",
        "password=\nPASSWORD=\"\"\napi_key=''",
        "PASSWORD_MIN_LENGTH=8\nMIN_PASSWORD_LENGTH=12\nTOKEN_TTL=3600\nPASSWORD_HASH_ROUNDS=12",
        "the token count is 42, so the prompt fits in the context window",
        "use a password manager such as 1Password; never reuse a password.",
        "AKIA is the prefix of long-term AWS access key ids; ASIA marks temporary ones.",
        "see src/secret_store.rs, src/auth/token.rs and tests/password_reset_test.py",
        "def load(api_key: str, token: Optional[str] = None, password: str | None = None) -> Client:",
        "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\nmd5 d41d8cd98f00b204e9800998ecf8427e",
        "The Bearer scheme is described in RFC 6750: send `Authorization: Bearer <token>` with each request.",
        "\"usage\": {\"input_tokens\": 1523, \"output_tokens\": 87, \"cache_read_input_tokens\": 0}",
        "MAX_TOKENS=4096\nmax_tokens: 1024\n\"tokenizer\": \"cl100k_base\"",
        "env:\n  GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}\n  NPM_TOKEN: ${{ secrets.NPM_TOKEN }}",
        "export OPENAI_API_KEY=$OPENAI_API_KEY\nAPI_KEY=<your-api-key>\nTOKEN=xxx\nSECRET=***\nAPI_KEY=your_api_key_here\nDB_PASSWORD=${DB_PASSWORD}",
        "let token = Token::new(TokenKind::Ident, span);\nlet secret = std::env::var(\"SECRET\")?;",
        "password = os.environ[\"DB_PASSWORD\"]\ntoken = get_token()\napi_key = settings.OPENAI_API_KEY",
        "client = Client(token=token, api_key=self.api_key, auth=auth)",
        "--- PASS: TestRedact (0.00s)\nPASS\nok  \tgithub.com/acme/api\t0.012s",
        "PWD=/home/dev/project\nOLDPWD=/home/dev\nSSH_AUTH_SOCK=/tmp/ssh-abc/agent.42\nGIT_ASKPASS=/usr/lib/git-core/git-gui--askpass",
        "author: Jane Doe\n\"author\": \"Jane Doe <jane@example.com>\"\n\"authors\": [\"a\", \"b\"]",
        "token_type: Bearer\n{\"token_type\": \"bearer\", \"expires_in\": 3600}",
        "auth: true\nAUTH=1\nauth: required\nauth: basic\n**Auth:** OAuth 2.0 device flow",
        "git clone https://user@github.com/acme/repo.git\ngit clone ssh://git@github.com:22/acme/repo.git\ngit@github.com:acme/repo.git",
        "DATABASE_URL=postgres://user:password@localhost:5432/db\nREDIS_URL=redis://:${REDIS_PASSWORD}@redis:6379",
        "pass the --token flag to authenticate, or use docker login --password-stdin < pw.txt",
        "interface Config { apiKey?: string; password: string; token: string | undefined }",
        "pub struct Creds { pub token: String, pub password: Option<String>, secret: SecretString }",
        "if (!token) throw new Error(\"token: missing\");",
        "eyJ is how base64-encoded JSON starts; AIza starts Google API keys; ghp_ starts GitHub tokens",
        "secret_key: SECRET_KEY\npassword: \"{{ .Values.postgres.password }}\"\npassword: \"********\"",
        "const headers = { Authorization: `Bearer ${token}` };",
        "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu1SU1LfVLPHCozMxH2Mo\n-----END PUBLIC KEY-----\n-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\n-----END CERTIFICATE-----",
        "Slack bot tokens start with xoxb- and Stripe secret keys with sk_live_.",
        "requests.get(url, auth=auth, headers=headers, timeout=10)",
        "function login(password: string): Promise<Token> { return api.post('/login', { password }); }",
        "| Key | Value |\n|-----|-------|\n| token | see below |\n\"key\": \"value\"\ncache_key: user:42",
        "$ git log --format='%H %an' -1\n9fceb02d0ae598e95dc970b74767f19372d61af8 Jane Doe",
        "print(\"Enter password: \", end=\"\")\npassword = getpass.getpass()",
        // Code found in real crates: struct fields, type annotations, match arms, generics.
        "pub struct Lit { token: Literal, semi_token: Some, colon2_token: Colon2 }",
        "pub pw_passwd: *mut c_char,\npassword: *const c_void,\npub token_start: __u32,",
        "pending_wake_token: Mutex<Option<Token>>,\nAuth: AsyncAuthorizeRequest<ReqBody>,",
        "fn contains_token(&self, token: T) -> bool;\nfn from(token: Literal) -> Self {",
        "Self::GithubToken => \"github_token\",\nSelf::NpmToken => \"npm_token\",",
        "let password = Value { start, end };\nlet token = tok;\ntype Token = Self;",
        "Token { kind, span: token: cached, semi_token: semi, }",
        "self.pass_through_unaccepted = enabled;\nneedless_pass_by_value = \"warn\"",
        "permissions:\n  contents: read\n  id-token: write",
        "/// * AZURE_STORAGE_ACCESS_KEY: alias for AZURE_STORAGE_ACCOUNT_KEY\n///  - `release_token_raw`: Tries to set it",
        "authorization: AuthorizationRef,\ncurl -H \"Authorization: Bearer OAUTH2_TOKEN\" https://storage.googleapis.com",
        "abfss://c047b3e34e89407a98d7cf9949ae92a3@onelake.dfs.fabric.microsoft.com/ws/files",
        "decodes PEM blocks with or without \"-----BEGIN PRIVATE KEY-----\"\n/// and \"-----END PRIVATE KEY-----\" headers",
        "/// token          = 1*tchar\nlet response: TokenResponse = client\n    .post(url)",
        "in `PASSWORD=…` or `\"token\": \"…\"`; GitHub tokens look like `ghp_…`; the secret: `x = y`",
        // Not a Secret manifest, or a template; code cut off mid-call; names, not keys.
        "kind: ConfigMap\ndata:\n  app.properties: |\n    feature.flags=alpha,beta,gamma\n  log_level: debug-verbose",
        "kind: Secret\nstringData:\n  password: \"{{ .Values.db.password }}\"\n  short: YmFyCg==",
        "password = getToken(\ntoken = cache[key](\nsecret = build(config[0], {",
        "git checkout master-2024-release-candidate-build\nsession: abc123\nsession_id: 42",
        "tracing-subscriber-env-filter-directive-parser",
        "the run-tests-on-Linux-x86_64-with-glibc2-39-v1 job",
        // What a build prints: mangled symbols, identifiers of words, patch and source paths.
        "/usr/bin/ld: main.o: undefined reference to `_ZNKSt10moneypunctIwLb0EE16do_decimal_pointEv'",
        "error: linking with `cc` failed\n  = note: _ZN4core9panicking5panic17h8a7c2f0e1d3b4a59E",
        "warning: unused constant `NID_id_GostR3410_2001_CryptoPro_XchA_ParamSet` in aws_lc_0_47_0_d2i_AutoPrivateKey",
        " src/OT/Layout/GPOS/SinglePosFormat1.hh | 14 +++++\n 0003-target-riscv-kvm-change-KVM_REG_RISCV_FP_F-to-u32.patch",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    v.push(format!(
        "Here is the screenshot: ![diagram](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA{image}==) as requested."
    ));
    v.push(format!(
        "uuids: {}-{}-4{}-a{}-{}",
        f.chars(HEX, 8),
        f.chars(HEX, 4),
        f.chars(HEX, 3),
        f.chars(HEX, 3),
        f.chars(HEX, 12)
    ));
    v
}

#[test]
fn look_alikes_come_back_unchanged() {
    let cases = look_alikes();
    assert!(cases.len() >= 25);
    for text in &cases {
        let findings = scan(text);
        let shown: Vec<_> = findings
            .iter()
            .map(|f| (f.kind, &text[f.range()]))
            .collect();
        assert!(shown.is_empty(), "flagged {shown:?} in:\n{text}");
        let (out, findings) = redact(text);
        assert!(matches!(out, Cow::Borrowed(_)));
        assert_eq!(out, text.as_str());
        assert!(findings.is_empty());
    }
}

/// A value that a name beside it makes a secret, in the shapes a transcript holds besides
/// `key = value`: an environment lookup's default, a fallback, an XML element, a sentence,
/// the `-p` of the commands that take a password, a `.netrc` entry. Each secret goes and the
/// name stays; the same shapes around words, empties and prompts change nothing.
#[test]
fn secrets_named_by_calls_elements_sentences_and_commands_go() {
    let mut fake = Fake(0xC0_7E47);
    let token = fake.mixed(ALNUM, 24);
    let pass = format!("{}!{}", fake.mixed(ALNUM, 8), fake.chars("0123456789", 3));
    for text in [
        format!("os.getenv(\"OPENAI_API_KEY\", \"{token}\")"),
        format!("utils.GetEnvOrDefault(\"api_token\", \"{token}\")"),
        format!("const token = process.env.API_TOKEN || \"{token}\";"),
        format!("let s = env::var(\"SECRET\").unwrap_or(\"{token}\".into());"),
        format!("key = os.environ.get(\"STRIPE_KEY\") or '{token}'"),
        format!("<password>{pass}</password>"),
        format!("  <ns:ClientSecret>{token}</ns:ClientSecret>"),
        format!("ok, my password is {pass}. can you log in?"),
        format!("The API key was {token}, then I rotated it"),
        format!("mysql -u root -p{pass} shop < dump.sql"),
        format!("sshpass -p '{pass}' ssh deploy@host"),
        format!("docker login -u bob -p {token} registry.example.io"),
        format!("machine api.example.io login bob password {pass}"),
        format!("machine api.example.io\n  login bob\n  password {pass}\n"),
    ] {
        let (out, findings) = redact(&text);
        assert!(
            !out.contains(&token) && !out.contains(&pass) && !findings.is_empty(),
            "{text} -> {out}"
        );
    }
    for text in [
        "t(\"password\", \"Enter your password\")",
        "config.get(\"token\", \"\")",
        "os.getenv(\"API_TOKEN\", \"changeme\")",
        "<password></password> <description>the password</description>",
        "<token>{{ .Values.token }}</token>",
        "the token is expired, and the password is too short",
        "the API key is stored in ~/.config/acme/key2.json",
        "the access token was 3600s long",
        "mysql -u root -p shop",
        "docker login -u bob --password-stdin registry.example.io",
        "the machine has a login prompt and a password field",
    ] {
        let (out, findings) = redact(text);
        assert_eq!(out, text, "{findings:?}");
    }
}

/// What one of gitleaks' rules matches and its own allowlist keeps is not found again by the
/// redactor's shapeless detectors (a random token, a key name and a value): gitleaks' published
/// example keys, a `publicToken`, a key's id. The same values under a secret's name still go.
#[test]
fn what_a_rules_allowlist_keeps_no_other_detector_takes() {
    let mut fake = Fake(0x5EED_A110);
    let value = fake.mixed(ALNUM, 43);
    for (kept, text) in [
        // gitleaks' gcp-api-key allowlist lists this published key by value.
        (
            true,
            "maps key AIzaSyASWm6HmTMdYWpgMnjRBjxcQ9CKctWmLd4 in the app".to_owned(),
        ),
        // gitleaks' generic rule keeps a public token and a key's id by their match.
        (true, format!("publicToken = \"{value}\"")),
        (true, format!("signing_key_id: {value}")),
        // gitleaks' NuGet rule runs on `nuget.config` files only, but its allowlist still
        // names this value a near miss.
        (
            true,
            "<add key=\"ClearTextPassword\" value=\"33f!!lloppa\" />".to_owned(),
        ),
        (
            false,
            format!("<add key=\"ClearTextPassword\" value=\"{value}\" />"),
        ),
        (false, format!("apiToken = \"{value}\"")),
        (false, format!("signing_key: {value}")),
        (false, format!("the value was {value} yesterday")),
    ] {
        let (out, findings) = redact(&text);
        if kept {
            assert_eq!(out, text.as_str(), "{findings:?}");
        } else {
            assert_ne!(out, text.as_str(), "{text}");
        }
    }
    // A key of the same shape that no allowlist names is redacted.
    let key = format!("AIzaSy{}", fake.mixed(ALNUM, 33));
    let text = format!("maps key {key} in the app");
    let (out, _) = redact(&text);
    assert!(!out.contains(&key), "{out}");
}

#[test]
fn a_large_clean_transcript_has_no_findings() {
    let mut big = String::new();
    let looks = look_alikes();
    while big.len() < 1 << 20 {
        for l in &looks {
            big.push_str(l);
            big.push_str("\n\n");
        }
    }
    assert!(scan(&big).is_empty());
}

// ---- invariants --------------------------------------------------------------------------------

fn check_invariants(text: &str) {
    let findings = scan(text);
    let mut last_end = 0;
    for f in &findings {
        assert!(f.start < f.end, "empty finding {f:?}");
        assert!(f.end <= text.len(), "out of bounds {f:?}");
        assert!(f.start >= last_end, "unsorted or overlapping {findings:?}");
        assert!(text.is_char_boundary(f.start) && text.is_char_boundary(f.end));
        last_end = f.end;
    }
    let (once, first) = redact(text);
    assert_eq!(first, findings);
    let (twice, second) = redact(&once);
    assert!(
        second.is_empty(),
        "second pass found {:?} in:\n{once}",
        second
            .iter()
            .map(|f| (f.kind, &once[f.range()]))
            .collect::<Vec<_>>()
    );
    assert_eq!(twice, once);
}

#[test]
fn corpus_and_look_alikes_satisfy_the_invariants() {
    for case in corpus() {
        check_invariants(&case.text);
    }
    for text in look_alikes() {
        check_invariants(&text);
    }
    let all: String = corpus()
        .iter()
        .map(|c| c.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    check_invariants(&all);
}

#[test]
fn kind_names_are_unique_rule_ids_and_round_trip() {
    let mut names: Vec<&str> = SecretKind::ALL.iter().map(|k| k.name()).collect();
    for (kind, name) in SecretKind::ALL.iter().zip(&names) {
        // gitleaks' style: lowercase words joined by `-`.
        assert!(
            name.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
            "{name}"
        );
        assert_eq!(SecretKind::from_name(name), Some(*kind));
        assert_eq!(kind.to_string(), *name);
        assert_eq!(placeholder(*kind), format!("{PLACEHOLDER_PREFIX}{name}]"));
    }
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), SecretKind::ALL.len());
    assert_eq!(SecretKind::from_name("nope"), None);
}

#[test]
fn own_redactor_matches_the_global_one_and_apply_matches_redact() {
    let r = Redactor::new();
    for case in corpus() {
        let findings = r.scan(&case.text);
        assert_eq!(findings, scan(&case.text));
        assert_eq!(apply(&case.text, &findings), redact(&case.text).0);
    }
}

/// Pieces that, glued together at random, make texts near the edges of the rules.
fn fragment() -> impl Strategy<Value = String> {
    let mut f = Fake(99);
    let mut pieces: Vec<String> = vec![
        "PASSWORD".into(),
        "api_key".into(),
        "\"token\"".into(),
        "Authorization".into(),
        "Bearer ".into(),
        "Basic ".into(),
        "=".into(),
        ": ".into(),
        ":".into(),
        "\"".into(),
        "'".into(),
        "\\\"".into(),
        "\\n".into(),
        "\n".into(),
        " ".into(),
        "--password ".into(),
        "-u ".into(),
        "https://".into(),
        "user:".into(),
        "@".into(),
        "-----BEGIN RSA PRIVATE KEY-----\n".into(),
        "-----END RSA PRIVATE KEY-----".into(),
        "[REDACTED:".into(),
        "]".into(),
        "é€😀".into(),
        "sk-".into(),
        "ghp_".into(),
        "AKIA".into(),
        "eyJ".into(),
        ".".into(),
        "str = ".into(),
        "$".into(),
        "b\"".into(),
        // The shapes a name gives a value in: calls, fallbacks, elements, sentences, commands.
        "getenv(\"API_TOKEN\", ".into(),
        " || ".into(),
        " or ".into(),
        ".unwrap_or(".into(),
        "<password>".into(),
        "</password>".into(),
        "</".into(),
        "my password is ".into(),
        " was ".into(),
        "mysql -p".into(),
        "docker login -p ".into(),
        "machine h login u password ".into(),
        "_ZNSt".into(),
        "_Word_".into(),
    ];
    pieces.push(f.mixed(ALNUM, 36));
    pieces.push(f.mixed(B64, 40));
    pieces.push(f.mixed(B64URL, 20));
    pieces.push(f.chars(UPPER_B32, 16));
    pieces.push(f.mixed(B64, 64));
    for case in corpus().into_iter().take(6) {
        pieces.push(case.text);
    }
    prop_oneof![
        4 => proptest::sample::select(pieces),
        1 => "\\PC{0,12}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_texts_satisfy_the_invariants(parts in proptest::collection::vec(fragment(), 0..16)) {
        check_invariants(&parts.concat());
    }

    #[test]
    fn arbitrary_strings_satisfy_the_invariants(text in "\\PC{0,200}") {
        check_invariants(&text);
    }
}
