#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the fleet runners without a scheduler: every YAML file parses, every
shell script passes `bash -n`, and each runner maps its scheduler's index to
--shard, names one base seed and writes a report where its merge step reads.

Usage: check_runners.py [FOLDER]   (default: this script's folder)
Prints one line per check; exits 1 when any fails.
"""
import pathlib
import re
import subprocess
import sys

import yaml

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def env_of(container):
    return {e["name"]: str(e.get("value", "")) for e in container.get("env", [])}


def check_k8s(folder):
    docs = list(yaml.safe_load_all((folder / "k8s_indexed_job.yaml").read_text()))
    check(len(docs) == 1 and docs[0]["kind"] == "Job", "k8s_indexed_job.yaml: one Job")
    spec = docs[0]["spec"]
    check(spec.get("completionMode") == "Indexed", "k8s_indexed_job.yaml: completionMode Indexed")
    pod = spec["template"]["spec"]
    check(pod.get("restartPolicy") == "Never", "k8s_indexed_job.yaml: restartPolicy Never (a pod failure policy needs it)")
    (container,) = pod["containers"]
    env = env_of(container)
    check(env.get("PAV_SHARDS") == str(spec.get("completions")),
          "k8s_indexed_job.yaml: PAV_SHARDS (%s) equals completions (%s)" % (env.get("PAV_SHARDS"), spec.get("completions")))
    check(spec.get("parallelism", 1) <= spec.get("completions", 0), "k8s_indexed_job.yaml: parallelism within completions")
    line = " ".join(container.get("command", []) + container.get("args", []))
    check('--shard "$JOB_COMPLETION_INDEX/$PAV_SHARDS"' in line, "k8s_indexed_job.yaml: --shard from JOB_COMPLETION_INDEX")
    check('--seed "$PAV_SEED"' in line and env.get("PAV_SEED", "").isdigit(), "k8s_indexed_job.yaml: one base seed")
    check("--report \"/reports/shard-$JOB_COMPLETION_INDEX.json\"" in line, "k8s_indexed_job.yaml: a report per shard")
    mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
    check(mounts.get("reports") == "/reports", "k8s_indexed_job.yaml: reports on the shared volume")
    script = container["args"][-1]
    check(subprocess.run(["bash", "-n", "-c", script]).returncode == 0, "k8s_indexed_job.yaml: its shell line parses")

    (merge,) = list(yaml.safe_load_all((folder / "k8s_merge_job.yaml").read_text()))
    (mc,) = merge["spec"]["template"]["spec"]["containers"]
    mline = " ".join(mc.get("command", []) + mc.get("args", []))
    check("pav report merge /reports/shard-*.json" in mline, "k8s_merge_job.yaml: merges the shards' reports")
    claims = [v["persistentVolumeClaim"]["claimName"] for d in (docs[0], merge)
              for v in d["spec"]["template"]["spec"]["volumes"]]
    check(len(set(claims)) == 1, "k8s: the fuzz and merge Jobs share one volume claim")


def check_github(folder):
    wf = yaml.safe_load((folder / "github_actions.yml").read_text())
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` as true
    check(triggers is not None, "github_actions.yml: has triggers")
    fuzz, merge = wf["jobs"]["fuzz"], wf["jobs"]["merge"]
    shards = fuzz["strategy"]["matrix"]["shard"]
    check(shards == list(range(len(shards))), "github_actions.yml: matrix shards are 0..N-1")
    check(str(fuzz["env"]["SHARDS"]) == str(len(shards)), "github_actions.yml: SHARDS equals the matrix length")
    check(fuzz["strategy"].get("fail-fast") is False, "github_actions.yml: one shard's failure does not cancel the others")
    run = " ".join(s.get("run", "") for s in fuzz["steps"])
    check('--shard "${{ matrix.shard }}/$SHARDS"' in run, "github_actions.yml: --shard from the matrix index")
    check('--seed "${{ github.run_id }}"' in run, "github_actions.yml: one base seed per workflow run")
    check('--report "reports/shard-${{ matrix.shard }}.json"' in run, "github_actions.yml: a report per shard")
    check(merge.get("needs") == "fuzz" and merge.get("if") == "always()", "github_actions.yml: merge runs after every shard")
    mrun = " ".join(s.get("run", "") for s in merge["steps"])
    check("report merge reports/shard-*.json" in mrun, "github_actions.yml: merges the shards' reports")


def check_scripts(folder):
    for script in sorted(folder.glob("*.sh")):
        check(subprocess.run(["bash", "-n", str(script)]).returncode == 0, script.name + ": bash -n")
    slurm = (folder / "slurm_array.sh").read_text()
    check('--shard "$SLURM_ARRAY_TASK_ID/$shards"' in slurm, "slurm_array.sh: --shard from SLURM_ARRAY_TASK_ID")
    check(re.search(r"--seed \"\$\{PAV_SEED:-\$job\}\"", slurm) is not None, "slurm_array.sh: one base seed per array")
    check('--report "$dir/shard-$SLURM_ARRAY_TASK_ID.json"' in slurm, "slurm_array.sh: a report per shard")
    host = (folder / "multi_gpu.sh").read_text()
    check("CUDA_VISIBLE_DEVICES=$dev HIP_VISIBLE_DEVICES=$dev" in host, "multi_gpu.sh: each shard pinned to its GPU")


def main():
    folder = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent)
    check_k8s(folder)
    check_github(folder)
    check_scripts(folder)
    print("%d check(s) failed" % len(failures) if failures else "all runner checks pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
