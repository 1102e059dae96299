"""Model artifacts' file formats: what the framework components write and the server reads.

Below both producer and consumer (layer 1): the components (`headwater.components.<fw>`)
save models with these modules, and the model server (`headwater.serving.runtimes`) loads
them, so neither imports the other.

* `directory`: `metadata.json` beside the model, shared by every framework's layout.
* `torch_file`: the PyTorch layout (state dict, TorchScript export, metadata, code).
* `xgboost_file`: the XGBoost layout (UBJSON booster, metadata).
* `torch_explain`: Captum attributions of a loaded PyTorch model (`explain_model`, `:explain`).
* `libraries`: the optional libraries these need, imported on call.

Nothing here imports a framework until a function runs.
"""
