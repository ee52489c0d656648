#!/usr/bin/env python3
"""Checks deploy/kubernetes/ without a cluster: every manifest parses, and
the files agree on the image, the namespace, the Services' names and ports,
the Secrets, the claims and the devices each pod needs.

    check_kubernetes.py DIR    exit 0 when consistent, 1 with one line per problem
"""
import re
import sys
from pathlib import Path

import yaml


def main(folder):
    problems = []
    docs = []
    for path in sorted(Path(folder).glob("*.yaml")):
        try:
            for doc in yaml.safe_load_all(path.read_text()):
                if doc is None:
                    continue
                for key in ("apiVersion", "kind", "metadata"):
                    if key not in doc:
                        problems.append(f"{path.name}: a {doc.get('kind', '?')} without {key}")
                docs.append((path.name, doc))
        except yaml.YAMLError as e:
            problems.append(f"{path.name}: does not parse: {e}")
    by_kind = {}
    for name, d in docs:
        by_kind.setdefault(d.get("kind"), []).append((name, d))

    for name, d in docs:
        if d["kind"] != "Namespace" and d["metadata"].get("namespace") != "leapfrog":
            problems.append(f"{name}: {d['kind']} {d['metadata'].get('name')} is not in namespace leapfrog")

    services = {d["metadata"]["name"]: d for _, d in by_kind.get("Service", [])}
    secrets = {d["metadata"]["name"]: set(d.get("stringData", {})) for _, d in by_kind.get("Secret", [])}
    claims = {d["metadata"]["name"] for _, d in by_kind.get("PersistentVolumeClaim", [])}
    workloads = by_kind.get("Deployment", []) + by_kind.get("StatefulSet", [])
    images = set()
    labels_of = {}
    for name, w in workloads:
        wname = w["metadata"]["name"]
        tmpl = w["spec"]["template"]
        labels = tmpl["metadata"].get("labels", {})
        if w["spec"]["selector"]["matchLabels"] != labels:
            problems.append(f"{name}: {wname}'s selector does not match its pod labels")
        labels_of[wname] = (labels, tmpl["spec"])
        pod = tmpl["spec"]
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for t in w["spec"].get("volumeClaimTemplates", []):
            volumes[t["metadata"]["name"]] = {"claim": True}
        for c in pod["containers"]:
            if c["image"].startswith("leapfrog:"):
                images.add(c["image"])
            for m in c.get("volumeMounts", []):
                if m["name"] not in volumes:
                    problems.append(f"{name}: {wname} mounts undeclared volume {m['name']}")
            for v in volumes.values():
                sec = v.get("secret", {}).get("secretName")
                if sec and sec not in secrets:
                    problems.append(f"{name}: {wname} reads Secret {sec}, which no manifest defines")
                claim = v.get("persistentVolumeClaim", {}).get("claimName")
                if claim and claim not in claims:
                    problems.append(f"{name}: {wname} claims {claim}, which no manifest defines")
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref and ref["key"] not in secrets.get(ref["name"], set()):
                    problems.append(f"{name}: {wname} reads {ref['name']}/{ref['key']}, which is not defined")
            args = " ".join(c.get("args", []))
            # Every address an agent or VM launcher is given is a Service's port.
            for host, port in re.findall(r"--coordinator=([\w.-]+):(\d+)", args):
                svc = services.get(host)
                ports = {p["port"] for p in svc["spec"]["ports"]} if svc else set()
                if int(port) not in ports:
                    problems.append(f"{name}: {wname} dials {host}:{port}, which no Service offers")
            for flag, port in re.findall(r"--(listen|http)=0\.0\.0\.0:(\d+)", args):
                if int(port) not in {p.get("containerPort") for p in c.get("ports", [])}:
                    problems.append(f"{name}: {wname} listens on {port} (--{flag}) but declares no such port")
            # The devices the work needs, and privilege to use them.
            mounts = {m["mountPath"] for m in c.get("volumeMounts", [])}
            prog = c.get("command", [""])[0]
            needs = []
            if prog.endswith("leapfrog-agent"):
                needs = ["/dev/fuse", "/dev/loop-control"]
            elif "vm" in c.get("args", []) and "run" in c.get("args", []):
                needs = ["/dev/kvm"]
            for dev in needs:
                if dev not in mounts:
                    problems.append(f"{name}: {wname} needs {dev} mounted")
            if needs and not c.get("securityContext", {}).get("privileged"):
                problems.append(f"{name}: {wname} needs a privileged container")
    if len(images) != 1:
        problems.append(f"the manifests name {len(images)} Leapfrog images ({sorted(images)}), want one")
    for sname, svc in services.items():
        sel = svc["spec"]["selector"]
        targets = [(w, spec) for w, (labels, spec) in labels_of.items() if all(labels.get(k) == v for k, v in sel.items())]
        if not targets:
            problems.append(f"Service {sname} selects no pod")
        for p in svc["spec"]["ports"]:
            named = {cp.get("name") for _, spec in targets for c in spec["containers"] for cp in c.get("ports", [])}
            if isinstance(p["targetPort"], str) and p["targetPort"] not in named:
                problems.append(f"Service {sname} targets port {p['targetPort']}, which its pods do not name")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
