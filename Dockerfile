# The worker and the watcher (docker-compose.yml runs both from this image).
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies first, from pyproject alone, so code edits do not reinstall them.
COPY pyproject.toml ./
RUN mkdir models planning workflows activities workers kubesim \
    && touch models/__init__.py planning/__init__.py workflows/__init__.py \
       activities/__init__.py workers/__init__.py kubesim/__init__.py \
    && pip install . \
    && pip uninstall --yes omeflow

COPY models ./models
COPY planning ./planning
COPY workflows ./workflows
COPY activities ./activities
COPY workers ./workers
COPY kubesim ./kubesim
RUN pip install --no-deps .

# No root: the processes only talk to Temporal and the Kubernetes API.
USER 65532:65532

CMD ["python", "-m", "workers"]
