//! `cargo xtask ci-matrix --format github|gitlab|slurm [--runners LIST]`:
//! the CI job matrix of `ci/matrix.json` (backend x runner kind, required
//! or optional), as JSON for a GitHub Actions `fromJSON`, as a GitLab
//! `parallel:matrix` fragment, or as one line per Slurm submission. The
//! templates take CPU and GPU runners from separate matrices, so that GPU
//! jobs can be limited to trusted code.

use std::process::ExitCode;

use serde_json::{Value, json};

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `{"include": [...]}` for `strategy.matrix: ${{ fromJSON(...) }}`.
    Github,
    /// A `parallel: matrix:` YAML fragment.
    Gitlab,
    /// One line per job: backend, runner, required, partition, GPUs (0 or 1).
    Slurm,
}

/// Whether a job's runner is among `runners`: runner names, `cpu` or `gpu`
/// (every runner without or with a GPU), or `all`.
fn selected(runners: &[String], name: &str, gpu: bool) -> bool {
    runners.iter().any(|r| r == "all" || r == name || (r == "gpu" && gpu) || (r == "cpu" && !gpu))
}

/// The jobs of the matrix description whose runner is among `selection`,
/// each with its runner's settings.
fn jobs(description: &Value, selection: &[String]) -> Result<Vec<Value>, String> {
    let runners = description["runners"].as_object().ok_or("ci/matrix.json: no `runners` object")?;
    let jobs = description["jobs"].as_array().ok_or("ci/matrix.json: no `jobs` array")?;
    for name in selection {
        if !["all", "cpu", "gpu"].contains(&name.as_str()) && !runners.contains_key(name) {
            return Err(format!(
                "unknown runner `{name}` in --runners (known: all, cpu, gpu, {})",
                runners
                    .keys()
                    .filter(|k| !["all", "cpu", "gpu"].contains(&k.as_str()))
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    let all: Result<Vec<Value>, String> = jobs
        .iter()
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
                "gpu": runner["gpu"].as_bool().ok_or_else(|| format!("runner `{runner_name}` without `gpu` (true or false)"))?,
                "runs_on": runner["github_runs_on"],
                "tags": runner["gitlab_tags"],
                "partition": runner["slurm_partition"],
            }))
        })
        .collect();
    Ok(all?
        .into_iter()
        .filter(|j| selected(selection, j["runner"].as_str().unwrap_or(""), j["gpu"].as_bool().unwrap_or(true)))
        .collect())
}

/// The matrix in `format`, of the jobs whose runner is in `runners`.
pub fn render(description: &Value, format: Format, runners: &[String]) -> Result<String, String> {
    let jobs = jobs(description, runners)?;
    if jobs.is_empty() {
        return Err(format!("no job runs on {}", runners.join(", ")));
    }
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
        Format::Slurm => jobs
            .iter()
            .map(|j| {
                format!(
                    "{} {} {} {} {}\n",
                    j["backend"].as_str().unwrap_or(""),
                    j["runner"].as_str().unwrap_or(""),
                    j["required"].as_bool().unwrap_or(true),
                    j["partition"].as_str().unwrap_or(""),
                    u8::from(j["gpu"].as_bool().unwrap_or(true))
                )
            })
            .collect(),
    })
}

/// Reads `ci/matrix.json` and prints the matrix of the jobs on `runners`.
pub fn run(format: Format, runners: &[String]) -> ExitCode {
    let result = std::fs::read_to_string("ci/matrix.json")
        .map_err(|e| format!("ci/matrix.json: {e} (run from the repository root)"))
        .and_then(|text| serde_json::from_str::<Value>(&text).map_err(|e| format!("ci/matrix.json: {e}")))
        .and_then(|description| render(&description, format, runners));
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

    fn all() -> Vec<String> {
        vec!["all".to_string()]
    }

    fn description() -> Value {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../ci/matrix.json");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn github_matrix_is_json_with_every_job() {
        let text = render(&description(), Format::Github, &all()).unwrap();
        let parsed: Value = serde_json::from_str(&text).unwrap();
        let include = parsed["include"].as_array().unwrap();
        assert_eq!(include.len(), description()["jobs"].as_array().unwrap().len());
        assert!(include.iter().any(|j| j["backend"] == "cuda" && j["runner"] == "nvidia" && j["required"] == true));
        assert!(include.iter().all(|j| j["runs_on"].is_array()));
    }

    #[test]
    fn gitlab_matrix_is_yaml_and_matches_the_template() {
        let text = render(&description(), Format::Gitlab, &all()).unwrap();
        let docs = yaml_rust2::YamlLoader::load_from_str(&text).unwrap();
        let matrix = docs[0]["parallel"]["matrix"].as_vec().unwrap();
        assert_eq!(matrix.len(), description()["jobs"].as_array().unwrap().len());
        assert_eq!(matrix[0]["BACKEND"].as_str(), Some("host"));
        // The checked-in pipeline has one job per runner kind, carrying that
        // runner's generated fragment verbatim.
        let template =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../ci/gitlab/conformance.gitlab-ci.yml"))
                .unwrap();
        for runner in ["cpu", "nvidia", "amd"] {
            let text = render(&description(), Format::Gitlab, &[runner.to_string()]).unwrap();
            let indented: String = text.lines().map(|l| format!("  {l}\n")).collect();
            assert!(
                template.contains(&format!("conform-{runner}:")) && template.contains(&indented),
                "regenerate with `cargo xtask ci-matrix --format gitlab --runners {runner}`"
            );
        }
        let docs = yaml_rust2::YamlLoader::load_from_str(&template).unwrap();
        // GPU jobs never run merge-request pipelines (code from forks).
        let trusted = &docs[0][".trusted-only"];
        let rules = trusted["rules"].as_vec().unwrap();
        assert_eq!(rules[0]["if"].as_str(), Some("$CI_PIPELINE_SOURCE == \"merge_request_event\""));
        assert_eq!(rules[0]["when"].as_str(), Some("never"));
        for job in ["conform-nvidia", "conform-amd"] {
            // yaml-rust2 keeps a merge key (`<<`) as a plain key holding the merged mappings.
            let merged = docs[0][job]["<<"].as_vec().unwrap();
            assert!(merged.contains(trusted), "{job} does not merge .trusted-only");
        }
    }

    #[test]
    fn github_gpu_jobs_never_run_for_pull_requests() {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../ci/github/conformance.yml")).unwrap();
        let docs = yaml_rust2::YamlLoader::load_from_str(&text).unwrap();
        let jobs = &docs[0]["jobs"];
        assert!(jobs["conform-gpu"]["strategy"]["matrix"].as_str().is_some_and(|m| m.contains("outputs.gpu")));
        assert!(jobs["conform-cpu"]["strategy"]["matrix"].as_str().is_some_and(|m| m.contains("outputs.cpu")));
        let condition = jobs["conform-gpu"]["if"].as_str().unwrap();
        assert!(!condition.contains("pull_request") && condition.contains("github.event_name == 'push'"));
        assert_eq!(docs[0]["permissions"]["contents"].as_str(), Some("read"));
        for (name, job) in jobs.as_hash().unwrap() {
            assert!(job["timeout-minutes"].as_i64().is_some(), "job {name:?} has no timeout-minutes");
        }
    }

    #[test]
    fn runner_selection() {
        let gpu = render(&description(), Format::Slurm, &["gpu".to_string()]).unwrap();
        assert!(gpu.lines().all(|l| l.ends_with(" 1")) && gpu.contains("cuda nvidia true gpu 1"));
        let cpu = render(&description(), Format::Slurm, &["cpu".to_string()]).unwrap();
        assert_eq!(cpu, "host cpu true cpu 0\nopencl cpu true cpu 0\n");
        assert!(render(&description(), Format::Slurm, &["tpu".to_string()]).unwrap_err().contains("tpu"));
    }

    #[test]
    fn unknown_runner_or_backend_is_an_error() {
        let bad = json!({"runners": {"cpu": {}}, "jobs": [{"backend": "metal", "runner": "cpu"}]});
        assert!(render(&bad, Format::Github, &all()).unwrap_err().contains("metal"));
        let bad = json!({"runners": {}, "jobs": [{"backend": "host", "runner": "tpu"}]});
        assert!(render(&bad, Format::Github, &all()).unwrap_err().contains("tpu"));
    }
}
