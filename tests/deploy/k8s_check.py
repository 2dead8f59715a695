"""Offline checks of deploy/k8s (no cluster needed): every manifest parses, and the pieces fit.

    python3 k8s_check.py DEPLOY_K8S_DIR

- a scheduler Deployment and a Service whose selector picks its pods, with ports 8786 and 8787;
- readiness and liveness probes on /health, port 8787, on the scheduler;
- GPU workers (Deployment or DaemonSet) with limits nvidia.com/gpu: 1, args pointing at the
  Service (tcp://SERVICE:8786), exec probes that look for pcuda-worker;
- a pbench Job pointed at the Service; a kustomization listing files that exist;
- every pod runs as non-root without privilege escalation.
"""
import os
import sys

import yaml

errors = []


def check(cond, what):
    if not cond:
        errors.append(what)
    return cond


def containers(obj):
    return obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []) or []


def pod_spec(obj):
    return obj.get("spec", {}).get("template", {}).get("spec", {}) or {}


def command_line(c):
    return [str(x) for x in (c.get("command") or []) + (c.get("args") or [])]


def port_number(container, port):
    """A probe's or Service's port (number or name) as a number, via the container's ports."""
    if isinstance(port, int):
        return port
    for p in container.get("ports") or []:
        if p.get("name") == port:
            return p.get("containerPort")
    return None


def main():
    root = sys.argv[1]
    docs = []
    for name in sorted(os.listdir(root)):
        if not name.endswith((".yaml", ".yml")):
            continue
        with open(os.path.join(root, name)) as f:
            try:
                for doc in yaml.safe_load_all(f):
                    if doc is not None:
                        docs.append((name, doc))
            except yaml.YAMLError as e:
                errors.append(f"{name}: does not parse: {e}")
    kinds = {}
    for name, doc in docs:
        if doc.get("kind") == "Kustomization":
            for res in doc.get("resources", []):
                check(os.path.exists(os.path.join(root, res)), f"kustomization: {res} does not exist")
            continue
        ok = all(k in doc for k in ("apiVersion", "kind", "metadata"))
        if check(ok and "name" in doc["metadata"], f"{name}: apiVersion/kind/metadata.name missing"):
            kinds.setdefault(doc["kind"], []).append(doc)
            print(f"{name}: {doc['kind']} {doc['metadata']['name']}")

    workloads = kinds.get("Deployment", []) + kinds.get("DaemonSet", []) + kinds.get("Job", [])
    for w in workloads:
        spec = pod_spec(w)
        wname = w["metadata"]["name"]
        check(spec.get("securityContext", {}).get("runAsNonRoot") is True, f"{wname}: runAsNonRoot")
        for c in containers(w):
            sc = c.get("securityContext", {})
            check(sc.get("allowPrivilegeEscalation") is False, f"{wname}: allowPrivilegeEscalation")
            check(bool(c.get("image")), f"{wname}: no image")

    # The scheduler and its Service.
    schedulers = [d for d in kinds.get("Deployment", [])
                  if any(command_line(c)[:1] == ["psched"] for c in containers(d))]
    if not check(len(schedulers) == 1, "exactly one scheduler Deployment (command psched)"):
        return
    sched = schedulers[0]
    sc = [c for c in containers(sched) if command_line(c)[:1] == ["psched"]][0]
    check(sched["spec"].get("replicas", 1) == 1, "the scheduler runs one replica")
    cports = {p.get("containerPort") for p in sc.get("ports") or []}
    check({8786, 8787} <= cports, f"scheduler container ports {cports} lack 8786/8787")
    for probe in ("readinessProbe", "livenessProbe"):
        p = sc.get(probe, {}).get("httpGet", {})
        check(p.get("path") == "/health" and port_number(sc, p.get("port")) == 8787,
              f"scheduler {probe}: not httpGet /health on 8787 ({p})")
    labels = sched["spec"]["template"]["metadata"].get("labels", {})
    services = [s for s in kinds.get("Service", [])
                if s["spec"].get("selector") and
                all(labels.get(k) == v for k, v in s["spec"]["selector"].items())]
    if not check(len(services) == 1, "exactly one Service selecting the scheduler's pods"):
        return
    svc = services[0]
    svc_name = svc["metadata"]["name"]
    ports = {p.get("port"): port_number(sc, p.get("targetPort", p.get("port")))
             for p in svc["spec"].get("ports", [])}
    check(ports.get(8786) == 8786 and ports.get(8787) == 8787,
          f"Service {svc_name}: ports 8786 and 8787 must reach the container's 8786/8787 ({ports})")
    print(f"scheduler: Deployment {sched['metadata']['name']}, Service {svc_name} {sorted(ports)}")

    targets = (f"tcp://{svc_name}:8786", f"{svc_name}:8786", f"tcp://{svc_name}", svc_name)
    def points_at_service(args):
        return any(a in targets or a.startswith(f"tcp://{svc_name}.") or a.startswith(f"{svc_name}.")
                   for a in args)

    # GPU workers.
    workers = [d for d in kinds.get("Deployment", []) + kinds.get("DaemonSet", [])
               if any(command_line(c)[:1] == ["pcuda-worker"] for c in containers(d))]
    check(len(workers) >= 1, "no worker Deployment/DaemonSet (command pcuda-worker)")
    for w in workers:
        for c in containers(w):
            if command_line(c)[:1] != ["pcuda-worker"]:
                continue
            gpus = c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
            check(str(gpus) == "1", f"worker {w['metadata']['name']}: limits nvidia.com/gpu is {gpus}, not 1")
            check(points_at_service(command_line(c)),
                  f"worker {w['metadata']['name']}: args {command_line(c)} do not name Service {svc_name}")
            for probe in ("readinessProbe", "livenessProbe"):
                p = c.get(probe, {})
                ok = ("pcuda-worker" in " ".join(p.get("exec", {}).get("command", []))
                      or "httpGet" in p or "tcpSocket" in p)
                check(ok, f"worker {w['metadata']['name']}: no {probe} looking at pcuda-worker")
            print(f"workers: {w['kind']} {w['metadata']['name']}, nvidia.com/gpu {gpus}, {command_line(c)}")

    # The benchmark Job.
    jobs = [j for j in kinds.get("Job", []) if any(command_line(c)[:1] == ["pbench"] for c in containers(j))]
    check(len(jobs) >= 1, "no pbench Job")
    for j in jobs:
        for c in containers(j):
            args = command_line(c)
            check("-d" in args or "--distributed" in args, f"Job {j['metadata']['name']}: pbench without -d")
            check(points_at_service(args), f"Job {j['metadata']['name']}: args do not name Service {svc_name}")
            check(pod_spec(j).get("restartPolicy") in ("Never", "OnFailure"), "Job restartPolicy")


main()
if errors:
    for e in errors:
        print("FAIL:", e)
    sys.exit(1)
print("PASS: deploy/k8s manifests")
