#!/bin/sh
# alternating launches of vanilla's and auto's mlp backward builds
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_plm=isolated
P=bench/results/2026-11-29-Xeon16-lease61-ed6a609-cpu-4ranks.prof
R=${R:-4}
for m in mlp attention; do
  sz="-D B=2 -D S=1024 -D D=512"; [ $m = attention ] && sz="$sz -D H=8"
  for s in vanilla auto 'fuse(ring)'; do
    a=; [ "$s" = auto ] && a=--profile=$P
    d=ex/$m-$R-$(echo "$s" | tr -d '(),=')
    sh scripts/build-model.sh build $d examples/$m.cf $sz --backward -D tp=$R --schedule="$s" $a > $d.log 2>&1 || cat $d.log
  done
done
for i in 1 2 3 4; do
 for m in mlp attention; do
  for s in vanilla auto fusering; do
    echo "$m $s $i $(mpirun --allow-run-as-root --oversubscribe --timeout 100 -n $R ex/$m-$R-$s/run --iters 9 --warmup 2)"
  done
 done
done
