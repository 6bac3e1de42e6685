# Independent reference implementation of the hardware-challenge formats, written
# from the package documentation alone (doc.go, matrix.go, merkle.go, verify.go).
# It prints the values TestGolden pins. Needs Python 3 and the "cryptography"
# package for AES-CTR: python3 testdata/reference.py
import hashlib, struct
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
def H(b): return hashlib.sha256(b).digest()
seed = b"gpunet golden".ljust(32, b"\0")
N,K,M = 64,128,192
sz = struct.pack("<III", N,K,M)
def stream(tag, nbytes):
    key = H(tag + seed + sz)
    enc = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor()
    return enc.update(bytes(nbytes))
s8 = lambda b: b - 256 if b > 127 else b
SA = stream(b"gpunet/challenge/v1/A\0", N*K)
SB = stream(b"gpunet/challenge/v1/B\0", M*K)
A = [[s8(SA[i*K+x]) for x in range(K)] for i in range(N)]
B = [[s8(SB[j*K+x]) for j in range(M)] for x in range(K)]   # B[x][j]
C = [[sum(A[i][x]*B[x][j] for x in range(K)) for j in range(M)] for i in range(N)]
print("A[0][0:8]", A[0][:8]); print("B[0:8][63]", [B[x][63] for x in range(8)]); print("C[5][7]", C[5][7])
flat = [v for row in C for v in row]
leaves = [H(b"\0" + struct.pack("<64i", *flat[l*64:(l+1)*64])) for l in range(len(flat)//64)]
L = len(leaves); d = (L-1).bit_length()
level = leaves + [None]*((1<<d) - L)   # None = empty subtree
def node(a,b):
    if a is None and b is None: return None
    return H(b"\1" + a + (b if b is not None else bytes(32)))
while len(level) > 1:
    level = [node(level[2*x], level[2*x+1]) for x in range(len(level)//2)]
root = level[0]; print("root", root.hex())
base = H(b"gpunet/challenge/v1/open\0" + seed + sz + root + H(b"golden randomness"))
total = N*M; limit = (2**64-1)//total*total
sel=[]; seen=set(); w=0
while len(sel) < 3:
    blk = H(base + struct.pack("<Q", w//4)); x = struct.unpack("<Q", blk[8*(w%4):8*(w%4)+8])[0]; w+=1
    if x >= limit: continue
    e = x % total; r, c = e//M, e%M; leaf = r*(M//64)+c//64
    if leaf in seen: continue
    seen.add(leaf); sel.append((r,c))
print("sel", sel)
