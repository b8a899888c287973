package org.apache.hadoop.mapred;

/**
 * Sets a task's phase as MapTask does on its way (Task.setPhase is protected): the tests drive
 * a collector as MapTask drives it, which enters the sort phase only after a mapper succeeded.
 */
public final class TaskPhases {
  private TaskPhases() {}

  public static void set(Task task, TaskStatus.Phase phase) {
    task.setPhase(phase);
  }
}
