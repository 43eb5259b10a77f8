//! `cargo xtask ci-matrix --format github|gitlab`: the CI job matrix of
//! `ci/matrix.json` (backend x runner kind, required or optional), as JSON
//! for a GitHub Actions `fromJSON` or as a GitLab `parallel:matrix` fragment.

use std::process::ExitCode;

use serde_json::{Value, json};

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `{"include": [...]}` for `strategy.matrix: ${{ fromJSON(...) }}`.
    Github,
    /// A `parallel: matrix:` YAML fragment.
    Gitlab,
}

/// The jobs of the matrix description, each with its runner's settings.
fn jobs(description: &Value) -> Result<Vec<Value>, String> {
    let runners = description["runners"].as_object().ok_or("ci/matrix.json: no `runners` object")?;
    let jobs = description["jobs"].as_array().ok_or("ci/matrix.json: no `jobs` array")?;
    jobs.iter()
        .map(|job| {
            let runner_name = job["runner"].as_str().ok_or("a job without `runner`")?;
            let runner = runners.get(runner_name).ok_or_else(|| format!("unknown runner `{runner_name}`"))?;
            let backend = job["backend"].as_str().ok_or("a job without `backend`")?;
            if !["host", "opencl", "cuda", "hip"].contains(&backend) {
                return Err(format!("unknown backend `{backend}`"));
            }
            Ok(json!({
                "backend": backend,
                "runner": runner_name,
                "required": job["required"].as_bool().unwrap_or(true),
                "runs_on": runner["github_runs_on"],
                "tags": runner["gitlab_tags"],
                "partition": runner["slurm_partition"],
            }))
        })
        .collect()
}

/// The matrix in `format`.
pub fn render(description: &Value, format: Format) -> Result<String, String> {
    let jobs = jobs(description)?;
    Ok(match format {
        Format::Github => {
            let include: Vec<Value> = jobs
                .iter()
                .map(|j| json!({"backend": j["backend"], "runner": j["runner"], "required": j["required"], "runs_on": j["runs_on"]}))
                .collect();
            serde_json::to_string(&json!({ "include": include })).map_err(|e| e.to_string())?
        }
        Format::Gitlab => {
            let mut out = String::from("parallel:\n  matrix:\n");
            for j in &jobs {
                let tag = j["tags"].as_array().and_then(|t| t.first()).and_then(Value::as_str).unwrap_or("");
                out += &format!(
                    "    - BACKEND: \"{}\"\n      RUNNER: \"{}\"\n      RUNNER_TAG: \"{tag}\"\n      REQUIRED: \"{}\"\n",
                    j["backend"].as_str().unwrap_or(""),
                    j["runner"].as_str().unwrap_or(""),
                    j["required"].as_bool().unwrap_or(true)
                );
            }
            out
        }
    })
}

/// Reads `ci/matrix.json` and prints the matrix.
pub fn run(format: Format) -> ExitCode {
    let result = std::fs::read_to_string("ci/matrix.json")
        .map_err(|e| format!("ci/matrix.json: {e} (run from the repository root)"))
        .and_then(|text| serde_json::from_str::<Value>(&text).map_err(|e| format!("ci/matrix.json: {e}")))
        .and_then(|description| render(&description, format));
    match result {
        Ok(text) => {
            println!("{}", text.trim_end());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cargo xtask ci-matrix: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn description() -> Value {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../ci/matrix.json");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn github_matrix_is_json_with_every_job() {
        let text = render(&description(), Format::Github).unwrap();
        let parsed: Value = serde_json::from_str(&text).unwrap();
        let include = parsed["include"].as_array().unwrap();
        assert_eq!(include.len(), description()["jobs"].as_array().unwrap().len());
        assert!(include.iter().any(|j| j["backend"] == "cuda" && j["runner"] == "nvidia" && j["required"] == true));
        assert!(include.iter().all(|j| j["runs_on"].is_array()));
    }

    #[test]
    fn gitlab_matrix_is_yaml_and_matches_the_template() {
        let text = render(&description(), Format::Gitlab).unwrap();
        let docs = yaml_rust2::YamlLoader::load_from_str(&text).unwrap();
        let matrix = docs[0]["parallel"]["matrix"].as_vec().unwrap();
        assert_eq!(matrix.len(), description()["jobs"].as_array().unwrap().len());
        assert_eq!(matrix[0]["BACKEND"].as_str(), Some("host"));
        // The checked-in pipeline carries the generated fragment verbatim.
        let template =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../ci/gitlab/conformance.gitlab-ci.yml"))
                .unwrap();
        let indented: String = text.lines().map(|l| format!("  {l}\n")).collect();
        assert!(template.contains(&indented), "regenerate with `cargo xtask ci-matrix --format gitlab`");
        assert!(yaml_rust2::YamlLoader::load_from_str(&template).is_ok());
    }

    #[test]
    fn github_workflow_parses() {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../ci/github/conformance.yml")).unwrap();
        let docs = yaml_rust2::YamlLoader::load_from_str(&text).unwrap();
        assert!(docs[0]["jobs"]["conform"]["strategy"]["matrix"].as_str().is_some_and(|m| m.contains("fromJSON")));
    }

    #[test]
    fn unknown_runner_or_backend_is_an_error() {
        let bad = json!({"runners": {"cpu": {}}, "jobs": [{"backend": "metal", "runner": "cpu"}]});
        assert!(render(&bad, Format::Github).unwrap_err().contains("metal"));
        let bad = json!({"runners": {}, "jobs": [{"backend": "host", "runner": "tpu"}]});
        assert!(render(&bad, Format::Github).unwrap_err().contains("tpu"));
    }
}
