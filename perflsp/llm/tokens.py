"""Token estimate for prompt budgets, without a tokenizer download.

tiktoken is not a dependency and cannot fetch its encodings offline, so perflsp estimates:
one token per 3 characters. BPE tokenizers (cl100k, o200k, Llama 3) average about 3.3-4
characters per token on C/C++ source and English prose, so this overestimates by 10-30%:
a prompt that passes the budget check fits the real budget too. Ratios between two prompts
(ours vs the whole file) do not depend on the constant.
"""

from __future__ import annotations

import math

CHARS_PER_TOKEN = 3.0


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)
