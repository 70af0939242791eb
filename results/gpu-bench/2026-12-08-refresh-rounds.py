#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# A one-off count of the balanced refresh's search rounds (kernels/hip/refresh.hip) for the
# bench's batch of 256 (bench/gpu/gpu_bench.cpp trace_batch; the order does not matter), at
# Hkv 1 and 8, 132 compute units, the default budget, split cost and minimum chunk: the
# device's spread of one target per warp over [lo, hi], replayed on the host.
# Output: 2026-12-08-refresh-rounds.txt.
import math
def trace_batch(batch):
    u=[0.0,0.5,0.9,0.99,1.0]; tok=[40000,120000,334000,764000,800000]
    def q(x):
        for i in range(4):
            if x<=u[i+1]: return tok[i]*(tok[i+1]/tok[i])**((x-u[i])/(u[i+1]-u[i]))
        return tok[4]
    shorts=batch//4; longs=batch-shorts
    lens=[int(q((j+0.5)/longs)) for j in range(longs)]; lens[-1]=764000
    lens+=[int(1000+7000*(j+0.5)/shorts) for j in range(shorts)]
    return lens
cd=lambda a,b: -(-a//b)
UN=1<<40
def count_for(t,target,sc,mx):
    if t<=0: return 0
    if t<=target: return 1
    room=target-sc
    if room<1: return UN
    c=(t-1)//room+1
    return c if c<=mx else UN
def run(lo,hi,tiles,most,lim,sc,warps):
    rounds=0
    while lo<hi:
        span=hi-lo
        fits=[sum(count_for(t,lo+span*w//warps,sc,m) for t,m in zip(tiles,most))<=lim for w in range(warps)]
        first=fits.index(True) if True in fits else warps
        nhi= lo+span*first//warps if first<warps else hi
        nlo= lo if first==0 else lo+span*(first-1)//warps+1
        lo,hi=nlo,nhi; rounds+=1
    return lo,rounds
def sim(lens,hkv,cu=132,warps=16,sc=1,mc=2):
    budget=2*cu; maxp=cu
    tiles=[cd(l,256) if l>0 else 0 for l in lens]
    most=[max(1,min(maxp,t//mc)) if t>0 else 0 for t in tiles]
    tb=cd(budget,hkv); cap=min(len(lens)*maxp,len(lens)+tb)
    ne=sum(1 for t in tiles if t>0); S=sum(tiles); M=max(tiles)
    limit=min(cap,max(ne,tb))
    lo=M if limit<=ne else max(1,cd(S,limit))
    t1,r1=run(lo,M,tiles,most,limit,sc,warps)
    r2=0; t=t1
    if cap>limit and 2*t1>3*cd(S,tb):
        lo2=min(t1,max(1,cd(S,tb)))
        t,r2=run(lo2,t1,tiles,most,cap,sc,warps)
    return dict(hkv=hkv,sum=S,max=M,limit=limit,cap=cap,first=(lo,M,t1,r1),second_rounds=r2,target=t)
lens=trace_batch(256)
for w in (16,32):
  for h in (1,8): print(w, sim(lens,h,warps=w))
