// The SmolLM2 lab's kernels, compiled to WebAssembly (128-bit SIMD, one thread).
//
// smollm2_forward.js runs the model's layers in the page and calls these for the
// heavy parts: products with the 4-bit and 8-bit weight blocks of the GGUF file,
// RMSNorm, the rotary embedding, one head's causal attention, and SwiGLU. Every
// number is float32, as in TransformerLens; row vectors and TransformerLens's names.
// Rebuild the module that carries the compiled bytes (smollm2_kernels.js) with
//   python -m circuitbook.widgets.smollm2_export --kernels
// (zig cc from the ziglang package, pinned in requirements.txt);
// tests/unit/test_smollm2_export.py checks that the committed bytes are this file's.
//
// Weight blocks, as llama.cpp stores them (32 weights along the input dimension):
//   Q4_1: f16 d, f16 m, 16 bytes of nibbles   w[i] = d * q[i] + m, q in 0..15
//         (low nibbles are weights 0..15, high nibbles 16..31)     20 bytes
//   Q8_0: f16 d, 32 int8                       w[i] = d * q[i]     34 bytes
// A weight matrix [N, K] (N outputs) is N rows of K / 32 blocks. Dequantising
// computes d * q, then + m, each rounded to float32: the same two roundings as
// gguf's dequantize_blocks, so the page's weights are the model's, bit for bit.

#include <wasm_simd128.h>

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;

#define EXPORT(name) __attribute__((export_name(#name)))
#define KMAX 1536  // the longest input dimension (d_mlp)

// exact: every float16 is a float32
static float f16(u16 h) {
  u32 sign = (u32)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0) {
    if (man == 0) bits = sign;
    else {  // subnormal: normalise
      exp = 113;
      while (!(man & 0x400)) { man <<= 1; exp--; }
      bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
    }
  } else if (exp == 31) bits = sign | 0x7f800000 | (man << 13);
  else bits = sign | ((exp + 112) << 23) | (man << 13);
  union { u32 u; float f; } v = { bits };
  return v.f;
}

static u16 rd16(const u8 *p) { return (u16)(p[0] | (p[1] << 8)); }

static float rows[4 * KMAX];  // four weight rows, dequantised

// one row of nb Q4_1 blocks -> out[32 nb]
static void dequant_q4_1(const u8 *b, int nb, float *out) {
  for (int j = 0; j < nb; j++, b += 20, out += 32) {
    v128_t d = wasm_f32x4_splat(f16(rd16(b))), m = wasm_f32x4_splat(f16(rd16(b + 2)));
    v128_t q = wasm_v128_load(b + 4);
    v128_t lo = wasm_v128_and(q, wasm_i8x16_splat(0x0f)), hi = wasm_u8x16_shr(q, 4);
    v128_t half[2] = { lo, hi };
    for (int s = 0; s < 2; s++) {
      v128_t a = wasm_u16x8_extend_low_u8x16(half[s]), c = wasm_u16x8_extend_high_u8x16(half[s]);
      v128_t u[4] = { wasm_u32x4_extend_low_u16x8(a), wasm_u32x4_extend_high_u16x8(a),
                      wasm_u32x4_extend_low_u16x8(c), wasm_u32x4_extend_high_u16x8(c) };
      for (int t = 0; t < 4; t++)
        wasm_v128_store(out + 16 * s + 4 * t,
                        wasm_f32x4_add(wasm_f32x4_mul(d, wasm_f32x4_convert_i32x4(u[t])), m));
    }
  }
}

// one row of nb Q8_0 blocks -> out[32 nb]
static void dequant_q8_0(const u8 *b, int nb, float *out) {
  for (int j = 0; j < nb; j++, b += 34, out += 32) {
    v128_t d = wasm_f32x4_splat(f16(rd16(b)));
    for (int s = 0; s < 2; s++) {
      v128_t q = wasm_v128_load(b + 2 + 16 * s);
      v128_t a = wasm_i16x8_extend_low_i8x16(q), c = wasm_i16x8_extend_high_i8x16(q);
      v128_t u[4] = { wasm_i32x4_extend_low_i16x8(a), wasm_i32x4_extend_high_i16x8(a),
                      wasm_i32x4_extend_low_i16x8(c), wasm_i32x4_extend_high_i16x8(c) };
      for (int t = 0; t < 4; t++)
        wasm_v128_store(out + 16 * s + 4 * t, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(u[t]), d));
    }
  }
}

static float hsum(v128_t v) {
  return (wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 1))
       + (wasm_f32x4_extract_lane(v, 2) + wasm_f32x4_extract_lane(v, 3));
}

// Y[p, n] (+)= sum_k X[p, k] W[n, k] for p < P, n < N, k < K = 32 nb.
// X rows are ldx floats apart, Y rows ldy; W's rows are `stride` bytes apart (a row
// of the whole matrix, so W may point into the middle of it: one head's blocks of
// W_O). Four rows of W are dequantised at a time, then met by two rows of X at a time
// (eight accumulators of four lanes: the register tile).
static void matmul(const float *X, int ldx, int P, int nb, const u8 *W, int stride, int N,
                   float *Y, int ldy, int add, int q8) {
  const int K = 32 * nb;
  for (int n0 = 0; n0 < N; n0 += 4) {
    const int nn = N - n0 < 4 ? N - n0 : 4;
    for (int j = 0; j < nn; j++) {
      if (q8) dequant_q8_0(W + (long)(n0 + j) * stride, nb, rows + j * K);
      else dequant_q4_1(W + (long)(n0 + j) * stride, nb, rows + j * K);
    }
    for (int j = nn; j < 4; j++)
      for (int k = 0; k < K; k++) rows[j * K + k] = 0.0f;
    const float *w0 = rows, *w1 = rows + K, *w2 = rows + 2 * K, *w3 = rows + 3 * K;
    int p = 0;
    for (; p + 1 < P; p += 2) {
      const float *x0 = X + (long)p * ldx, *x1 = x0 + ldx;
      v128_t a00 = wasm_f32x4_splat(0), a01 = a00, a02 = a00, a03 = a00;
      v128_t a10 = a00, a11 = a00, a12 = a00, a13 = a00;
      for (int k = 0; k < K; k += 4) {
        v128_t u = wasm_v128_load(x0 + k), v = wasm_v128_load(x1 + k);
        v128_t b0 = wasm_v128_load(w0 + k), b1 = wasm_v128_load(w1 + k);
        v128_t b2 = wasm_v128_load(w2 + k), b3 = wasm_v128_load(w3 + k);
        a00 = wasm_f32x4_add(a00, wasm_f32x4_mul(u, b0));
        a01 = wasm_f32x4_add(a01, wasm_f32x4_mul(u, b1));
        a02 = wasm_f32x4_add(a02, wasm_f32x4_mul(u, b2));
        a03 = wasm_f32x4_add(a03, wasm_f32x4_mul(u, b3));
        a10 = wasm_f32x4_add(a10, wasm_f32x4_mul(v, b0));
        a11 = wasm_f32x4_add(a11, wasm_f32x4_mul(v, b1));
        a12 = wasm_f32x4_add(a12, wasm_f32x4_mul(v, b2));
        a13 = wasm_f32x4_add(a13, wasm_f32x4_mul(v, b3));
      }
      float r[8] = { hsum(a00), hsum(a01), hsum(a02), hsum(a03),
                     hsum(a10), hsum(a11), hsum(a12), hsum(a13) };
      float *y0 = Y + (long)p * ldy + n0, *y1 = y0 + ldy;
      for (int j = 0; j < nn; j++) {
        y0[j] = add ? y0[j] + r[j] : r[j];
        y1[j] = add ? y1[j] + r[4 + j] : r[4 + j];
      }
    }
    for (; p < P; p++) {
      const float *x0 = X + (long)p * ldx;
      v128_t a0 = wasm_f32x4_splat(0), a1 = a0, a2 = a0, a3 = a0;
      for (int k = 0; k < K; k += 4) {
        v128_t u = wasm_v128_load(x0 + k);
        a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(u, wasm_v128_load(w0 + k)));
        a1 = wasm_f32x4_add(a1, wasm_f32x4_mul(u, wasm_v128_load(w1 + k)));
        a2 = wasm_f32x4_add(a2, wasm_f32x4_mul(u, wasm_v128_load(w2 + k)));
        a3 = wasm_f32x4_add(a3, wasm_f32x4_mul(u, wasm_v128_load(w3 + k)));
      }
      float r[4] = { hsum(a0), hsum(a1), hsum(a2), hsum(a3) };
      float *y0 = Y + (long)p * ldy + n0;
      for (int j = 0; j < nn; j++) y0[j] = add ? y0[j] + r[j] : r[j];
    }
  }
}

EXPORT(matmul_q4_1)
void matmul_q4_1(const float *X, int ldx, int P, int nb, const u8 *W, int stride, int N,
                 float *Y, int ldy, int add) {
  matmul(X, ldx, P, nb, W, stride, N, Y, ldy, add, 0);
}

EXPORT(matmul_q8_0)
void matmul_q8_0(const float *X, int ldx, int P, int nb, const u8 *W, int stride, int N,
                 float *Y, int ldy, int add) {
  matmul(X, ldx, P, nb, W, stride, N, Y, ldy, add, 1);
}

// the weights of rows idx[0..P) of a Q8_0 matrix (the embedding W_E) -> out [P, 32 nb]
EXPORT(embed_q8_0)
void embed_q8_0(const int *idx, int P, int nb, const u8 *W, float *out) {
  for (int p = 0; p < P; p++) dequant_q8_0(W + (long)idx[p] * 34 * nb, nb, out + (long)p * 32 * nb);
}

// Every row of a dequantised Q4_1 / Q8_0 matrix (for the tests: the page's weights)
EXPORT(dequant_rows)
void dequant_rows(const u8 *W, int nb, int N, int q8, float *out) {
  for (int n = 0; n < N; n++) {
    if (q8) dequant_q8_0(W + (long)n * 34 * nb, nb, out + (long)n * 32 * nb);
    else dequant_q4_1(W + (long)n * 20 * nb, nb, out + (long)n * 32 * nb);
  }
}

// RMSNorm, as TransformerLens's RMSNorm: y = x / sqrt(mean(x^2) + eps) * w. [P, D]
EXPORT(rmsnorm)
void rmsnorm(const float *x, int P, int D, const float *w, float eps, float *y) {
  for (int p = 0; p < P; p++, x += D, y += D) {
    v128_t s = wasm_f32x4_splat(0);
    for (int i = 0; i < D; i += 4) { v128_t v = wasm_v128_load(x + i); s = wasm_f32x4_add(s, wasm_f32x4_mul(v, v)); }
    float scale = __builtin_sqrtf(hsum(s) / (float)D + eps);
    v128_t sc = wasm_f32x4_splat(scale);
    for (int i = 0; i < D; i += 4)
      wasm_v128_store(y + i, wasm_f32x4_mul(wasm_f32x4_div(wasm_v128_load(x + i), sc), wasm_v128_load(w + i)));
  }
}

// The rotary embedding, in place, on n heads of 64 dimensions per row of x [P, ld]:
// x cos + rot(x) sin, rot([x1, x2]) = [-x2, x1] (halves, rotary_adjacent_pairs=False).
// cos, sin: [P, 64], TransformerLens's own tables (exported with the weights).
EXPORT(rope)
void rope(float *x, int ld, int P, int n, const float *cos, const float *sin) {
  for (int p = 0; p < P; p++) {
    const float *c = cos + 64 * p, *s = sin + 64 * p;
    for (int h = 0; h < n; h++) {
      float *v = x + (long)p * ld + 64 * h;
      for (int i = 0; i < 32; i += 4) {
        v128_t a = wasm_v128_load(v + i), b = wasm_v128_load(v + 32 + i);
        v128_t lo = wasm_f32x4_add(wasm_f32x4_mul(a, wasm_v128_load(c + i)),
                                   wasm_f32x4_mul(wasm_f32x4_neg(b), wasm_v128_load(s + i)));
        v128_t hi = wasm_f32x4_add(wasm_f32x4_mul(b, wasm_v128_load(c + 32 + i)),
                                   wasm_f32x4_mul(a, wasm_v128_load(s + 32 + i)));
        wasm_v128_store(v + i, lo);
        wasm_v128_store(v + 32 + i, hi);
      }
    }
  }
}

// exp to float32 through float64 (a degree-11 Taylor series on |r| <= ln2 / 2 after
// range reduction: relative error below 1e-15 before the final rounding)
static float expf_(float xf) {
  double x = xf;
  if (x < -104.0) return 0.0f;
  if (x > 89.0) return __builtin_inff();
  double n = __builtin_floor(x * 1.4426950408889634 + 0.5), r = x - n * 0.6931471805599453;
  double t = 1.0 / 39916800.0;
  static const double inv[11] = { 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040,
                                  1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0, 1.0 };
  for (int i = 0; i < 11; i++) t = t * r + inv[i];
  union { unsigned long long u; double d; } s = { (unsigned long long)((long long)n + 1023) << 52 };
  return (float)(t * s.d);
}

// One head's causal attention: scores = q k^T / 8 (d_head 64), the pattern
// softmax(scores) over keys b <= a, and z = pattern v. q, k, v: rows of 64 floats
// ld* apart (one head's slice of the Q, K, V matrices). pattern: [P, P], zeros
// above the diagonal; z: rows ldz apart.
EXPORT(attend)
void attend(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv, int P,
            float *pattern, float *z, int ldz) {
  for (int a = 0; a < P; a++) {
    float *row = pattern + (long)a * P, max = -__builtin_inff();
    const float *qa = q + (long)a * ldq;
    for (int b = 0; b <= a; b++) {
      const float *kb = k + (long)b * ldk;
      v128_t s = wasm_f32x4_splat(0);
      for (int e = 0; e < 64; e += 4) s = wasm_f32x4_add(s, wasm_f32x4_mul(wasm_v128_load(qa + e), wasm_v128_load(kb + e)));
      row[b] = hsum(s) / 8.0f;
      if (row[b] > max) max = row[b];
    }
    float total = 0.0f;
    for (int b = 0; b <= a; b++) total += (row[b] = expf_(row[b] - max));
    for (int b = 0; b <= a; b++) row[b] /= total;
    for (int b = a + 1; b < P; b++) row[b] = 0.0f;
    v128_t acc[16];
    for (int e = 0; e < 16; e++) acc[e] = wasm_f32x4_splat(0);
    for (int b = 0; b <= a; b++) {
      v128_t w = wasm_f32x4_splat(row[b]);
      const float *vb = v + (long)b * ldv;
      for (int e = 0; e < 16; e++) acc[e] = wasm_f32x4_add(acc[e], wasm_f32x4_mul(w, wasm_v128_load(vb + 4 * e)));
    }
    float *za = z + (long)a * ldz;
    for (int e = 0; e < 16; e++) wasm_v128_store(za + 4 * e, acc[e]);
  }
}

// SwiGLU's gate, in place: g = silu(g) * u = g / (1 + exp(-g)) * u, n numbers
EXPORT(swiglu)
void swiglu(float *g, const float *u, int n) {
  for (int i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf_(-g[i])) * u[i];
}

// x += y, n numbers (the residual additions)
EXPORT(add)
void add(float *x, const float *y, int n) {
  int i = 0;
  for (; i + 4 <= n; i += 4) wasm_v128_store(x + i, wasm_f32x4_add(wasm_v128_load(x + i), wasm_v128_load(y + i)));
  for (; i < n; i++) x[i] += y[i];
}
