"""KFP's v2beta1 wire format, in one place: what `kfp.Client` sends and reads.

`wire` holds the conventions (error bodies, times, int64s, states, list queries), `convert`
turns Headwater's records into KFP's resources, and `requests` reads KFP's request bodies
(submissions, uploads, triggers) into what the store and the queue take. Nothing here speaks
HTTP or touches the store; `headwater.server.router` does both.
"""
