"""Learn the retriever's word vectors from wordvectors' corpus, offline.

    python3 train.py corpus.txt ../../retrieval/wordvec.bin.gz

Skip-gram with negative sampling (gensim 4.2, Debian's python3-gensim;
2 workers, so the run is not bit-for-bit repeatable), 100 dimensions, then
the 50,000 most frequent words, each vector scaled to its largest
coordinate and stored as signed bytes, gzipped. The format, read by
retrieval/wordvec.go: "APTIXWV1", the word count and the dimension as
little-endian uint32, then per word its length (one byte), its bytes and
its dimension's int8 coordinates.
"""
import gzip, struct, sys

import numpy as np
from gensim.models import Word2Vec
from gensim.models.word2vec import LineSentence

WORDS, DIM = 50000, 100

corpus, dst = sys.argv[1], sys.argv[2]
model = Word2Vec(LineSentence(corpus), vector_size=DIM, window=5, min_count=5,
                 sg=1, negative=10, sample=1e-4, epochs=5, workers=2)
words = model.wv.index_to_key[:WORDS]  # by frequency, most frequent first
m = np.stack([model.wv[w] for w in words])
m /= np.linalg.norm(m, axis=1, keepdims=True)
q = np.clip(np.round(m * 127 / np.abs(m).max(axis=1, keepdims=True)), -127, 127).astype(np.int8)
with gzip.open(dst, "wb", compresslevel=9) as out:
    out.write(b"APTIXWV1" + struct.pack("<II", len(words), DIM))
    for w, row in zip(words, q):
        b = w.encode()
        out.write(struct.pack("<B", len(b)) + b + row.tobytes())
