package org.apache.spark.sql.crossdock

import java.util.{ArrayList => JArrayList, TreeMap => JTreeMap}


import org.apache.spark.{Partition, ShuffleDependency, TaskContext}
import org.apache.spark.internal.Logging
import org.apache.spark.rdd.{MapPartitionsRDD, RDD}
import org.apache.spark.shuffle.crossdock.RangeSample
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, AttributeSeq, BindReferences, Expression, InterpretedUnsafeProjection, Literal, UnsafeRow}
import org.apache.spark.util.{CollectionAccumulator, LongAccumulator}
import scala.util.control.NonFatal
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
 * [[RangeSampleTap.MaxRows]] over the stage and [[RangeSampleTap.MaxBytes]] of rows: a kept row
 * holds only the sort key's columns (the others null, the schema unchanged, so the partition
 * function reads it as it reads the full row), and an input whose kept rows outgrow their share
 * of the bytes leaves the whole shuffle unsampled. The rows travel to the driver with the
 * sampling tasks' results and are dropped when the shuffle registers.
 *
 * `RangeSampleTap.SampledRows` (a named accumulator: the stages that sampled show it in Spark's
 * UI) counts the rows kept.
 *
 * One effect beyond the sample: Spark seeds its own sample with the id of an RDD created after
 * this one, so the range bounds (never the order) differ from those Spark's exchange would
 * choose, as they do whenever a plan's RDDs change.
 */
class RangeSampleTap(prev: RDD[InternalRow], partitions: Int, key: Seq[Expression],
    output: Seq[Attribute])
  extends RDD[InternalRow](prev) with RangeSample.Source with Logging {

  /** Rows kept per input partition (0: too many inputs to sample any). */
  private val reservoir: Int = RangeSampleTap.reservoirSize(partitions, prev.getNumPartitions)

  /** Bytes of kept rows an input partition may hold. */
  private val budget: Long = RangeSampleTap.MaxBytes / math.max(1, prev.getNumPartitions)

  /** The row as kept: the sort key's columns, the others null (the same schema). */
  private val keptColumns: Seq[Expression] = {
    val used = key.flatMap(_.references).map(_.exprId).toSet
    output.map(a => if (used.contains(a.exprId)) a else Literal(null, a.dataType))
  }

  private val rowsKept: LongAccumulator = {
    val acc = new LongAccumulator
    sparkContext.register(acc, RangeSampleTap.SampledRows)
    acc
  }

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
    if (!sampling || reservoir == 0) {
      rows
    } else {
      // Interpreted: a task keeps a few thousand rows, too few to pay for generating code.
      val keep = InterpretedUnsafeProjection.createProjection(
        BindReferences.bindReferences(keptColumns, AttributeSeq(output)))
      new RangeSampleTap.Sampling(rows, reservoir, budget, split.index,
        row => keep(row).copy(), sampled, rowsKept)
    }
  }

  override def dropSample(): Unit = {
    sampling = false
    sampled.reset()
  }

  override def takeSample(dep: ShuffleDependency[_, _, _]): RangeSample = {
    sampling = false
    try {
      sample(dep)
    } catch {
      // The sample only sharpens a prediction: without it the coordinator predicts from maps.
      case NonFatal(e) =>
        logWarning(s"Crossdock: no input sample for shuffle ${dep.shuffleId}: $e")
        null
      case e: LinkageError =>
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
    if (byInput.values.stream.anyMatch(_._3 == null)) {
      logInfo(s"Crossdock: shuffle ${dep.shuffleId}'s sort key is too large to sample in " +
        s"${RangeSampleTap.MaxBytes} bytes; its sizes are predicted from its first maps")
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

  /** Bytes of sampled rows a stage keeps at most. */
  val MaxBytes: Long = 32L << 20

  /** The accumulator of rows kept, as Spark's UI names it. */
  val SampledRows: String = "crossdock range sample rows"

  /** The paper's `s`: rows sampled per input partition per reduce partition. */
  val PerPartition: Int = 3

  /**
   * Rows an input partition keeps: `s × partitions`, within [[MaxRows]] over `inputs`; 0 (no
   * sample) when there are more inputs than [[MaxRows]].
   */
  def reservoirSize(partitions: Int, inputs: Int): Int = {
    val bound = MaxRows / math.max(1, inputs)
    math.min(PerPartition.toLong * partitions, bound.toLong).toInt
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

  /**
   * Passes an input partition's rows through, keeping a uniform sample of `size` of them (as
   * `keep` makes them), reported once the partition is read to its end: its rows, then the kept
   * ones, or null for them when they outgrew `budget` bytes.
   */
  private final class Sampling(
      rows: Iterator[InternalRow],
      size: Int,
      budget: Long,
      input: Int,
      keep: InternalRow => UnsafeRow,
      out: CollectionAccumulator[(Int, Long, Array[InternalRow])],
      kept: LongAccumulator)
    extends Iterator[InternalRow] {
    private val reservoir = new Array[UnsafeRow](size)
    private var seen = 0L
    private var bytes = 0L
    private var reported = false
    // Seeded by the input partition: the same input gives the same sample.
    private val random = new java.util.Random(0x5CAC4EL ^ input)

    override def hasNext: Boolean = {
      val more = rows.hasNext
      if (!more && !reported) {
        // Only a partition read to its end is reported: a partial read is no sample of it.
        reported = true
        val n = math.min(seen, size.toLong).toInt
        val rows = if (bytes > budget) null else Array.tabulate[InternalRow](n)(reservoir(_))
        out.add((input, seen, rows))
        kept.add(n)
      }
      more
    }

    override def next(): InternalRow = {
      val row = rows.next()
      seen += 1
      if (bytes <= budget) {
        val slot = if (seen <= size) seen - 1 else (random.nextDouble() * seen).toLong
        if (slot < size) {
          val old = reservoir(slot.toInt)
          if (old != null) {
            bytes -= old.getSizeInBytes
          }
          val copy = keep(row)
          bytes += copy.getSizeInBytes
          reservoir(slot.toInt) = copy
        }
      }
      row
    }


  }
}
