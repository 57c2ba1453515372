"""The real-model corpus's names (zoo/export_real.py): one list for the
genrule //zoo:real_models and the per-model tests in //optimiser."""

REAL_MODELS = [
    "cbam_resnet_op13",
    "control_flow_op13",
    "coreml_experimental_op7",
    "crnn_lstm_op9",
    "csp_mish_gelu_op20",
    "csp_mish_op18",
    "encoder_formula_op13",
    "formula_acts_op13",
    "formula_variants_op13",
    "fpn_op9",
    "fpn_op11",
    "fpn_op11_external",
    "fpn_op13",
    "gpt_decoder_kv_cache_op14",
    "gpt_decoder_merged_op14",
    "gpt_decoder_merged_op14_external",
    "hardswish_scale_first_op13",
    "hf_bert_classifier_op14",
    "hf_bert_classifier_fp16_op14",
    "keyword_gru_op13",
    "mish_cspdarknet_op13",
    "mobilenet_v3_small_op9",
    "nms_detector_op11",
    "ort_transformers_bert_op12",
    "paddle_lcnet_op11",
    "mobilenet_v3_formula_functions_op15",
    "mobilenet_v3_formula_op11",
    "mobilenet_v3_formula_op13",
    "mobilenet_v3_formula_fp16_op13",
    "mobilenet_v3_small_op13",
    "post_norm_encoder_op13",
    "post_norm_encoder_op17",
    "prelu_facenet_op13",
    "qdq_cnn_op13",
    "rotary_decoder_op14",
    "swin_tiny_op13",
    "tf2onnx_mobilenet_op13",
    "tf_same_pad_op11",
    "winml_tiny_yolov2_op8",
    "yolo_detect_op13",
]

# Models whose weights are in an external data file, "<name>.weights".
def real_model_files(m):
    return ["real_models/%s.onnx" % m] + (["real_models/%s.weights" % m] if m.endswith("_external") else [])
