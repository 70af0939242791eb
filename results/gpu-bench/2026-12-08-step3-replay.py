#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Round 4 step 3 (2026-12-08-step3.diff) replayed on the host: the one-wave search's probes also
# bracket the second wave's answer. Over 3000 random batches (lengths, Hkv, cu, budget), the
# device search with the bracket must give the host planner's binary-search targets; it prints
# the rounds with and without the bracket. With MUT=1 or MUT=2 it counts the batches that the
# kept mutants gpu-refresh-capacity-bracket-from-limit and gpu-refresh-balanced-second-wave-limit
# change (the GPU suite's property tests should see them). Output: 2026-12-08-step3-replay.txt.
import os
MUT = int(os.environ.get("MUT", "0"))
BAD = []
import random
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '2026-12-08-refresh-rounds.py')).read().split('lens=trace_batch(256)')[0])
def run2(lo,hi,tiles,most,lim,cap,sc,warps,track):
    """device spread search for lim; also tracks the cap bracket [L,H] from the same probes"""
    rounds=0
    while lo<hi:
        span=hi-lo
        probes=[lo+span*w//warps for w in range(warps)]
        counts=[sum(count_for(t,p,sc,m) for t,m in zip(tiles,most)) for p in probes]
        fits=[c<=lim for c in counts]
        fc=[c<=(lim if MUT == 1 else cap) for c in counts]
        if True in fc:
            f=fc.index(True); track['H']=min(track['H'],probes[f])
            if f>0: track['L']=max(track['L'],probes[f-1]+1)
        else:
            track['L']=max(track['L'],probes[-1]+1)
        first=fits.index(True) if True in fits else warps
        nhi= lo+span*first//warps if first<warps else hi
        nlo= lo if first==0 else lo+span*(first-1)//warps+1
        lo,hi=nlo,nhi; rounds+=1
    return lo,rounds
def host(lens,hkv,cu,sc=1,mc=2,budget=None):
    budget=budget or 2*cu; maxp=cu
    tiles=[cd(l,256) if l>0 else 0 for l in lens]
    most=[max(1,min(maxp,t//mc)) if t>0 else 0 for t in tiles]
    tb=cd(budget,hkv); cap=min(len(lens)*maxp,len(lens)+tb)
    ne=sum(1 for t in tiles if t>0); S=sum(tiles); M=max(tiles) if tiles else 0
    if ne==0: return 0,(0,0)
    limit=min(cap,max(ne,tb))
    def bs(lo,hi,lim):
        while lo<hi:
            mid=lo+(hi-lo)//2
            if sum(count_for(t,mid,sc,m) for t,m in zip(tiles,most))<=lim: hi=mid
            else: lo=mid+1
        return lo
    lo=M if limit<=ne else max(1,cd(S,limit))
    t1=bs(lo,M,limit); t=t1
    if cap>limit and 2*t1>3*cd(S,tb):
        t=bs(min(t1,max(1,cd(S,tb))),t1,cap)
    # device, old and new
    W=16
    tr={'H':1<<62,'L':0}
    d1,r1=run2(lo,M,tiles,most,limit,cap,sc,W,tr)
    assert d1==t1
    old_r2=new_r2=0; dn=d1
    if cap>limit and 2*d1>3*cd(S,tb):
        lo2=min(d1,max(1,cd(S,tb)))
        do,old_r2=run(lo2,d1,tiles,most,cap,sc,W)
        nlo=max(lo2,tr['L']); nhi=max(nlo,min(d1,tr['H']))
        dn,new_r2=run(nlo,nhi,tiles,most,limit if MUT == 2 else cap,sc,W)
        assert do==t, (do,t)
    if dn!=t:
        assert MUT, (dn,t,tr)
        BAD.append(1)
    return t,(r1+old_r2, r1+new_r2)
random.seed(5)
saved=tot=0; n=0
for it in range(3000):
    B=random.choice([1,2,3,5,16,32,64,100,256])
    kind=random.random()
    lens=[]
    for b in range(B):
        r=random.random()
        lens.append(0 if r<0.05 else random.randint(1,2000) if r<0.3 else int(random.lognormvariate(11.5,1.0)) if r<0.95 else random.randint(1,800000))
    hkv=random.choice([1,1,2,4,8,16]); cu=random.choice([8,16,66,132])
    budget=random.choice([None,None,4*cu,8*cu,cu])
    t,(a,b)=host(lens,hkv,cu,budget=budget)
    tot+=a; saved+=a-b; n+=1
print('batches',n,'rounds old',tot,'new',tot-saved)

lens=trace_batch(256)
print('bench batch hkv1', host(lens,1,132), 'hkv8', host(lens,8,132))
if MUT: print('mutant', MUT, 'changes', len(BAD), 'of', n, 'batches')
