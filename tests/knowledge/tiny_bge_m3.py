"""A tiny, randomly initialised BGE-M3-shaped model, written to a folder by the tests.

BGE-M3's weights cannot be downloaded here. BGEM3FlagModel loads any local folder that holds an
XLM-RoBERTa tokenizer and model plus ``colbert_linear.pt`` and ``sparse_linear.pt``; this builds
one (hidden size 32) in a few seconds, so the real loading and encoding code runs.
"""

from __future__ import annotations

from pathlib import Path

HIDDEN = 32

_LINES = [
    "数据库连接池配置",
    "支付失败排查手册",
    "退款未到账怎么办",
    "服务超时错误码",
    "如何重启缓存集群",
    "接口响应慢排查",
    "令牌过期需要刷新",
    "How to configure the database pool",
    "Payment failed with a timeout",
    "Refund status is pending",
    "error code ERR_TIMEOUT means the upstream did not answer",
    "restart the cache cluster after a failover",
    "the readiness probe must check dependencies",
]


def build_tiny_bge_m3(folder: Path) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import XLMRobertaConfig, XLMRobertaModel, XLMRobertaTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"{a} {b} {i}" for i in range(30) for a, b in zip(_LINES, reversed(_LINES), strict=True)]
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    tokenizer.train_from_iterator(
        lines,
        trainers.UnigramTrainer(
            vocab_size=1000, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"], unk_token="<unk>"
        ),
    )
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    XLMRobertaTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
        cls_token="<s>",
        sep_token="</s>",
    ).save_pretrained(folder)
    config = XLMRobertaConfig(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=600,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    XLMRobertaModel(config).save_pretrained(folder)
    torch.save(torch.nn.Linear(HIDDEN, HIDDEN).state_dict(), folder / "colbert_linear.pt")
    torch.save(torch.nn.Linear(HIDDEN, 1).state_dict(), folder / "sparse_linear.pt")
    return folder
