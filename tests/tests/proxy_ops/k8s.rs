//! `scripts/k8s/proxy.yaml`: the proxy's ConfigMap holds a config that loads, the Deployment's
//! probes ask the admin listener's /healthz on the port that config gives it, the pods are
//! hardened with Guaranteed QoS, and the Service and PodDisruptionBudget select the
//! Deployment's pods. (Every manifest also passes `kubernetes-validate --strict`: see
//! docs/OPERATIONS.md.)

use serde::Deserialize;
use serde_json::Value;
use std::path::PathBuf;

fn manifests() -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/k8s/proxy.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    serde_norway::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).expect("a YAML document"))
        .collect()
}

fn kind<'a>(docs: &'a [Value], k: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == k)
        .unwrap_or_else(|| panic!("no {k}"))
}

#[test]
fn the_deployment_probes_healthz_on_the_configs_admin_port() {
    let docs = manifests();
    let toml = kind(&docs, "ConfigMap")["data"]["proxy.toml"]
        .as_str()
        .expect("proxy.toml");
    // The upstream's cluster name does not resolve here: the same config with a literal.
    let here = toml.replace("app.default.svc.cluster.local:80", "127.0.0.1:80");
    let cfg = proxy::config::from_toml("proxy.toml", &here).expect("the ConfigMap's config");
    let admin = cfg.admin.expect("an admin listener for the probes");
    let pod = &kind(&docs, "Deployment")["spec"]["template"]["spec"];
    tests::manual::assert_hardened_pod("proxy.yaml", pod);
    let c = &pod["containers"][0];
    let port_of = |name: &str| {
        c["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap()["containerPort"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(port_of("admin"), u64::from(admin.port()));
    assert_eq!(port_of("http"), u64::from(cfg.listeners[0].addr.port()));
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(c[probe]["httpGet"]["path"], "/healthz", "{probe}");
        assert_eq!(c[probe]["httpGet"]["port"], "admin", "{probe}");
    }
    // The drain fits in the grace period, after the preStop pause.
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    let pause = c["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_u64()
        .unwrap();
    assert!(pause + cfg.timeouts.shutdown.as_secs() < grace);
    let labels = &kind(&docs, "Deployment")["spec"]["template"]["metadata"]["labels"];
    assert_eq!(&kind(&docs, "Service")["spec"]["selector"], labels);
    assert_eq!(
        &kind(&docs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
        labels
    );
}
