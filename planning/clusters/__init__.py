"""Reaching workload clusters (reference §16): a WorkloadCluster's `Ready` condition, and the
import of InferencePools its clusters export (Gateway API Inference Extension, multi-cluster)."""
