"""The model server: KServe V1 and Open Inference Protocol (V2) REST over FastAPI + uvicorn.

`headwater serve MODEL...` is the command; in Python, `headwater.serving.app.create_app`
builds the ASGI app. Importing this package imports nothing heavy; the server libraries
come with `pip install 'headwater[serve]'`, each framework with its own extra.

The modules, from the wire inwards::

    app          create_app: routes, error handlers, middleware
    routing      ProtocolRoutes: the V1/V2 routes called without FastAPI's routing
    v1, v2       the protocols' routes and payload conversions
    triton       Triton's /config, /stats and /v2/repository/index; StatisticsHooks
    binary       Triton's binary tensor data extension: JSON header, then raw tensors
    wire         bounded bodies, JSON answers, {"error": ...}
    observe      ServingHooks (metrics seam) and the request-observing middleware
    context      ServingContext: one prediction's call path, stage timing
    predictor    Predictor / ThreadPredictor: inference off the event loop (batching seam)
    batching     BatchingPredictor: adaptive batching (max_batch_size, max_latency_ms)
    traffic      CanaryPolicy: weighted, sticky canary split; promote, rollback
    admin        /admin/models/{name}/traffic, /load, /unload, /reload; ChangeLog (workers)
    metrics      PrometheusHooks and /metrics (a registry per app)
    repository   ModelRepository: endpoints by name
    endpoint     ModelEndpoint / ModelVersion / TrafficPolicy: atomic swaps (canary seam)
    runtimes/    ModelRuntime and one runtime per framework (xgboost, sklearn, torch, custom)
    tensors      V2 datatypes and shapes, JSON and binary data <-> NumPy
    resolve      MODEL specs -> ModelSource (registry, URIs, files, handlers)
    formats      which framework reads a file
    server       running uvicorn (one process or N workers); config: ServerConfig
    errors       the server's errors and their HTTP statuses
"""
