package org.apache.spark.sql.crossdock

import java.util.{ArrayList => JArrayList, TreeMap => JTreeMap}


import org.apache.spark.{Partition, ShuffleDependency, TaskContext}
import org.apache.spark.internal.Logging
import org.apache.spark.rdd.{MapPartitionsRDD, RDD}
import org.apache.spark.shuffle.crossdock.RangeSample
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.util.CollectionAccumulator
import org.crossdock.protocol.Structures

/**
 * The input of a range-partitioned exchange's map stage, passed through unchanged, that keeps a
 * uniform sample of each input partition (Algorithm R, SCache's reservoir sampling, paper 003
 * §3.2.2) while Spark's `RangePartitioner` reads the input to choose its bounds: the sample rides
 * on the pass Spark makes anyway. When the shuffle registers (right after the bounds are chosen,
 * before any map runs), `CrossdockShuffleManager` takes the sample ([[takeSample]]): sampling
 * stops, and the sampled rows go through the exchange's own partition function, so their
 * partitions are the ones the maps will write.
 *
 * Each input partition keeps `3 × partitions` rows (the paper's `s = 3`), at most
 * [[RangeSampleTap.MaxRows]] over the stage, as copies held until the shuffle registers.
 */
class RangeSampleTap(prev: RDD[InternalRow], partitions: Int)
  extends RDD[InternalRow](prev) with RangeSample.Source with Logging {

  /** Rows kept per input partition. */
  private val reservoir: Int = RangeSampleTap.reservoirSize(partitions, prev.getNumPartitions)

  /** (input partition, its records, its sampled rows), from the tasks that read it. */
  private val sampled: CollectionAccumulator[(Int, Long, Array[InternalRow])] = {
    val acc = new CollectionAccumulator[(Int, Long, Array[InternalRow])]
    sparkContext.register(acc)
    acc
  }

  /**
   * Read by the tasks (it goes with the RDD when a stage's tasks are serialized): true for the
   * sampling pass, false once the sample is taken, so the map stage runs without it.
   */
  @volatile private var sampling = true

  override protected def getPartitions: Array[Partition] = firstParent[InternalRow].partitions

  override protected def getPreferredLocations(split: Partition): Seq[String] =
    firstParent[InternalRow].preferredLocations(split)

  override def compute(split: Partition, context: TaskContext): Iterator[InternalRow] = {
    val rows = firstParent[InternalRow].iterator(split, context)
    if (!sampling) {
      rows
    } else {
      new RangeSampleTap.Sampling(rows, reservoir, split.index, sampled)
    }
  }

  override def takeSample(dep: ShuffleDependency[_, _, _]): RangeSample = {
    sampling = false
    try {
      sample(dep)
    } catch {
      // The sample only sharpens a prediction: without it the coordinator predicts from maps.
      case e: Exception =>
        logWarning(s"Crossdock: no input sample for shuffle ${dep.shuffleId}: $e")
        null
    } finally {
      sampled.reset()
    }
  }

  private def sample(dep: ShuffleDependency[_, _, _]): RangeSample = {
    val byInput = new JTreeMap[Integer, (Int, Long, Array[InternalRow])]()
    // A partition read twice (a task retried, Spark re-sampling an imbalanced one) counts once.
    sampled.value.forEach(s => byInput.putIfAbsent(s._1, s))
    if (byInput.isEmpty) {
      return null
    }
    val partitionOf = RangeSampleTap.partitionFunction(dep.rdd)
    val context = TaskContext.empty()
    val inputs = new JArrayList[Structures.InputSample]()
    val counts = new JArrayList[Structures.SampleCount]()
    val perPartition = new Array[Int](dep.partitioner.numPartitions)
    for (input <- 0 until getNumPartitions) {
      val s = byInput.get(input)
      if (s == null) {
        inputs.add(new Structures.InputSample(0, 0))
      } else {
        inputs.add(new Structures.InputSample(s._2, s._3.length))
        java.util.Arrays.fill(perPartition, 0)
        partitionOf(context, input, s._3.iterator).foreach { record =>
          perPartition(record.asInstanceOf[Product2[Any, Any]]._1.asInstanceOf[Int]) += 1
        }
        for (p <- perPartition.indices if perPartition(p) > 0) {
          counts.add(new Structures.SampleCount(input, p, perPartition(p)))
        }
      }
    }
    new RangeSample(inputs, counts)
  }
}

object RangeSampleTap {
  /** Sampled rows a stage keeps at most (row copies on the driver until the shuffle registers). */
  val MaxRows: Int = 100000

  /** The paper's `s`: rows sampled per input partition per reduce partition. */
  val PerPartition: Int = 3

  /** Rows an input partition keeps: `s × partitions`, within [[MaxRows]] over `inputs`. */
  def reservoirSize(partitions: Int, inputs: Int): Int = {
    val bound = math.max(1, MaxRows / math.max(1, inputs))
    math.max(1, math.min(PerPartition.toLong * partitions, bound.toLong).toInt)
  }

  /**
   * The function Spark SQL's exchange applies to each input partition to give every row its
   * partition: the `MapPartitionsRDD` that is the shuffle's map side, over the tap. Reflective
   * (its field is private to Spark's class), so it fails loudly, and the shuffle goes unsampled,
   * if a Spark version builds the map side otherwise.
   */
  private def partitionFunction(
      mapSide: RDD[_]): (TaskContext, Int, Iterator[InternalRow]) => Iterator[Any] = {
    mapSide match {
      case m: MapPartitionsRDD[_, _] =>
        val field = classOf[MapPartitionsRDD[_, _]].getDeclaredField("f")
        field.setAccessible(true)
        field.get(m).asInstanceOf[(TaskContext, Int, Iterator[InternalRow]) => Iterator[Any]]
      case other =>
        throw new IllegalStateException(
          s"the shuffle's map side is a ${other.getClass.getName}, not Spark SQL's partitioning")
    }
  }

  /** Passes an input partition's rows through, keeping a uniform sample of `size` of them. */
  private final class Sampling(
      rows: Iterator[InternalRow],
      size: Int,
      input: Int,
      out: CollectionAccumulator[(Int, Long, Array[InternalRow])])
    extends Iterator[InternalRow] {
    private val kept = new Array[InternalRow](size)
    private var seen = 0L
    private var reported = false
    // Seeded by the input partition: the same input gives the same sample.
    private val random = new java.util.Random(0x5CAC4EL ^ input)

    override def hasNext: Boolean = {
      val more = rows.hasNext
      if (!more && !reported) {
        // Only a partition read to its end is reported: a partial read is no sample of it.
        reported = true
        out.add((input, seen, java.util.Arrays.copyOf(kept, math.min(seen, size.toLong).toInt)))
      }
      more
    }

    override def next(): InternalRow = {
      val row = rows.next()
      seen += 1
      if (seen <= size) {
        kept((seen - 1).toInt) = row.copy()
      } else {
        val slot = (random.nextDouble() * seen).toLong
        if (slot < size) {
          kept(slot.toInt) = row.copy()
        }
      }
      row
    }
  }
}
