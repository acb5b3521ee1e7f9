"""Rules of the `InferenceService` workflow: components, Deployment-mode components, the
per-component objects, pause, scale and status."""
